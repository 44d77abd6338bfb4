package autograd_test

import (
	"errors"
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

// Grad returns gradients with respect to chosen vars (here an
// intermediate one) without touching any parameter's Grad.
func ExampleGrad() {
	tensor.WithScope(func() {
		w := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{0.5, -1}, 2), "w")
		defer w.Value.Release()
		x := autograd.Const(tensor.FromFloat64s(tensor.CPU(), []float64{2, 3}, 2))
		h := autograd.Mul(x, w)
		f := autograd.Sum(autograd.Mul(h, h), false)
		gs, err := autograd.Grad(f, []*autograd.Var{h, w}, autograd.GradOptions{})
		if err != nil {
			panic(err)
		}
		fmt.Println("df/dh =", gs[0].Float64s()) // 2h
		fmt.Println("df/dw =", gs[1].Float64s()) // 2h·x
		fmt.Println("w.Grad untouched:", w.Grad == nil)
	})
	// Output:
	// df/dh = [2 -6]
	// df/dw = [4 -18]
	// w.Grad untouched: true
}

// A tensor that a backward reads, written in place between the forward
// pass and Backward, fails Backward instead of giving the gradient at the
// new values (PyTorch raises there too).
func ExampleErrModified() {
	tensor.WithScope(func() {
		w := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{0.5, -1}, 2), "w")
		defer w.Value.Release()
		x := autograd.Const(tensor.FromFloat64s(tensor.CPU(), []float64{2, 3}, 2))
		f := autograd.Sum(autograd.Mul(x, w), false) // w's gradient is x
		x.Value.Fill(0)                              // x written in place
		err := f.Backward()
		fmt.Println(errors.Is(err, autograd.ErrModified), x.Value.Version())
	})
	// Output:
	// true 1
}
