package autograd_test

import (
	"fmt"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// The gradient of f(x, w) = sum((x·w)²) with respect to both inputs.
func Example() {
	tensor.WithScope(func() {
		x := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{1, 2, 3}, 3), "x")
		w := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{0.5, -1, 2}, 3), "w")
		xw := autograd.Mul(x, w)
		f := autograd.Sum(autograd.Mul(xw, xw), false)
		fmt.Println("f =", f.Item())
		if err := f.Backward(); err != nil {
			panic(err)
		}
		fmt.Println("df/dx =", x.Grad.Float64s()) // 2·x·w²
		fmt.Println("df/dw =", w.Grad.Float64s()) // 2·x²·w
		x.ZeroGrad()
		w.ZeroGrad()
		x.Value.Release() // parameters live outside scopes until released
		w.Value.Release()
	})
	// Output:
	// f = 40.25
	// df/dx = [0.5 4 24]
	// df/dw = [1 -8 36]
}

// Under NoGrad nothing is recorded: the result has no graph and no
// gradient flows to it.
func ExampleNoGrad() {
	tensor.WithScope(func() {
		w := autograd.Param(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2}, 2), "w")
		defer w.Value.Release()
		autograd.NoGrad(func() {
			y := autograd.Scale(w, 3)
			fmt.Println(y.Value.Float32s(), y.RequiresGrad())
		})
		y := autograd.Scale(w, 3)
		fmt.Println(y.Value.Float32s(), y.RequiresGrad())
	})
	// Output:
	// [3 6] false
	// [3 6] true
}

// GradCheck compares Backward's gradients with finite differences in
// float64, here for a composition of ops.
func ExampleGradCheck() {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(tensor.CPU(), []float64{0.3, -1.2, 0.7, 2.0, -0.5, 1.1}, 2, 3)
		w := tensor.FromFloat64s(tensor.CPU(), []float64{0.1, 0.4, -0.6}, 3)
		f := func(v []*autograd.Var) *autograd.Var {
			return autograd.Softmax(autograd.Tanh(autograd.Mul(v[0], v[1])))
		}
		err := autograd.GradCheck(f, []*tensor.Tensor{x, w}, nil, 1e-6, 1e-8, 1e-6)
		fmt.Println("gradients agree:", err == nil)
	})
	// Output:
	// gradients agree: true
}
