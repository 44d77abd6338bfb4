package tensor_test

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// Creating tensors and running ops on the CPU. Everything made inside
// WithScope is released when it returns.
func Example() {
	tensor.WithScope(func() {
		a := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		b := tensor.FromFloat32s(tensor.CPU(), []float32{10, 20, 30}, 3)
		fmt.Println(a)
		fmt.Println(tensor.Add(a, b).Float32s())                 // b broadcasts over the rows
		fmt.Println(tensor.MatMul(a, a.Transpose(0, 1)).Shape()) // a aᵀ, a transposed view
		fmt.Println(tensor.Sum(a, false, 1).Float32s())          // row sums
		fmt.Println(tensor.Softmax(tensor.Zeros(tensor.CPU(), tensor.Float32, 4)).Float32s())
		fmt.Println(a.Reshape(3, 2).Shape(), a.To(tensor.Float64).DType())
	})
	// Output:
	// Tensor(float32 [2 3] on cpu,
	// [[1, 2, 3],
	//  [4, 5, 6]])
	// [11 22 33 14 25 36]
	// [2 2]
	// [6 15]
	// [0.25 0.25 0.25 0.25]
	// [3 2] float64
}

// A Ctx is one goroutine's state: tensors made with its methods belong to
// its innermost scope, and closing the scope releases them.
func ExampleCtx_WithScope() {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := c.Ones(tensor.CPU(), tensor.Float32, 256, 256)
		y := tensor.Scale(x, 2) // an op's result joins its operands' context
		fmt.Println(y.Shape(), c.BytesInUse())
	})
	fmt.Println(c.BytesInUse())
	// Output:
	// [256 256] 524288
	// 0
}

// Ops panic with an *OpError on misuse; Try turns that into an error that
// names the op and wraps a sentinel.
func ExampleTry() {
	err := tensor.Try(func() {
		tensor.WithScope(func() {
			a := tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 3)
			b := tensor.Zeros(tensor.CPU(), tensor.Float32, 4, 5)
			tensor.MatMul(a, b)
		})
	})
	fmt.Println(errors.Is(err, tensor.ErrShape))
	var oe *tensor.OpError
	fmt.Println(errors.As(err, &oe), oe.Op)
	// Output:
	// true
	// true MatMul
}
