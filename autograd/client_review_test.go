package autograd_test

// A client's review of the engine: misuse and tricky graphs, with the
// gradients compared against PyTorch 1.13 (the snippet that gave each
// expected value is in a comment beside it; CI does not need PyTorch).

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// reviewParam is a float32 Param of vals in shape, released (value and
// gradient) when the test ends.
func reviewParam(t *testing.T, name string, vals []float32, shape ...int) *autograd.Var {
	t.Helper()
	p := autograd.Param(tensor.FromFloat32s(tensor.CPU(), vals, shape...), name)
	t.Cleanup(func() {
		p.ZeroGrad()
		p.Value.Release()
	})
	return p
}

// arange is 0, 1, ..., n-1 plus from, as float32.
func arange(from float32, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = from + float32(i)
	}
	return out
}

// konst is a Const of vals in shape.
func konst(vals []float32, shape ...int) *autograd.Var {
	return autograd.Const(tensor.FromFloat32s(tensor.CPU(), vals, shape...))
}

// dot is Sum(a * b): the objective whose gradient with respect to a is b.
func dot(a, b *autograd.Var) *autograd.Var { return autograd.Sum(autograd.Mul(a, b), false) }

// Products over a zero-width axis: a Linear with no input features (its
// output is the bias), a batched product with k = 0 or n = 0 against a
// shared matrix, and GeluLinear with no input features. The forward ran,
// but the backward (or, for in = 0, the forward) failed with
// "tensor.Reshape: cannot infer -1 in [-1 0] for 0 elements": the ops
// flattened their batch axes with Reshape(-1, last), which cannot infer
// the rows when last is 0. PyTorch differentiates all of them.
func TestZeroWidthProductsAgainstPyTorch(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		// x=torch.zeros(2,0,requires_grad=True); w=torch.zeros(3,0,requires_grad=True)
		// b=torch.tensor([1.,2.,3.],requires_grad=True); y=F.linear(x,w,b)
		// (y*torch.arange(6.).reshape(2,3)).sum().backward()
		// y: [[1,2,3],[1,2,3]]; x.grad (2,0); w.grad (3,0); b.grad [3,5,7]
		// (the same for F.linear(F.gelu(x, approximate='tanh'), w, b))
		for name, op := range map[string]func(x, w, b *autograd.Var) *autograd.Var{
			"Linear": autograd.Linear, "LinearHalf": autograd.LinearHalf,
			"GeluLinear": autograd.GeluLinear, "GeluLinearKept": autograd.GeluLinearKept,
		} {
			x := reviewParam(t, "x", nil, 2, 0)
			w := reviewParam(t, "w", nil, 3, 0)
			b := reviewParam(t, "b", []float32{1, 2, 3}, 3)
			var y *autograd.Var
			require.NoError(t, tensor.Try(func() { y = op(x, w, b) }), name)
			assert.Equal(t, []float32{1, 2, 3, 1, 2, 3}, y.Value.Float32s(), name)
			require.NoError(t, dot(y, konst(arange(0, 6), 2, 3)).Backward(), name)
			assert.Equal(t, []int{2, 0}, x.Grad.Shape(), name)
			assert.Equal(t, []int{3, 0}, w.Grad.Shape(), name)
			assert.Equal(t, []float32{3, 5, 7}, b.Grad.Float32s(), name)
		}

		// x=torch.arange(6.).reshape(2,3).requires_grad_(); w=torch.zeros(0,3,requires_grad=True)
		// F.linear(x,w).sum().backward(): y (2,0), x.grad zeros (2,3), w.grad (0,3)
		x := reviewParam(t, "x", arange(0, 6), 2, 3)
		w := reviewParam(t, "w", nil, 0, 3)
		y := autograd.Linear(x, w, nil)
		assert.Equal(t, []int{2, 0}, y.Shape())
		require.NoError(t, autograd.Sum(y, false).Backward())
		assert.Equal(t, make([]float32, 6), x.Grad.Float32s())
		assert.Equal(t, []int{0, 3}, w.Grad.Shape())

		// a=torch.ones(2,3,0,requires_grad=True); b=torch.ones(0,4,requires_grad=True)
		// (a@b).sum().backward(): y zeros (2,3,4); a.grad (2,3,0); b.grad (0,4)
		a := reviewParam(t, "a", nil, 2, 3, 0)
		bm := reviewParam(t, "b", nil, 0, 4)
		y = autograd.MatMul(a, bm)
		assert.Equal(t, make([]float32, 24), y.Value.Float32s())
		require.NoError(t, autograd.Sum(y, false).Backward())
		assert.Equal(t, []int{2, 3, 0}, a.Grad.Shape())
		assert.Equal(t, []int{0, 4}, bm.Grad.Shape())

		// a=torch.ones(2,4,3,requires_grad=True); b=torch.ones(3,0,requires_grad=True)
		// (a@b).sum().backward(): y (2,4,0); a.grad zeros (2,4,3); b.grad (3,0)
		a2 := autograd.Param(tensor.Ones(dev, tensor.Float32, 2, 4, 3), "a")
		defer a2.Value.Release()
		defer a2.ZeroGrad()
		bn := reviewParam(t, "b", nil, 3, 0)
		y = autograd.MatMul(a2, bn)
		assert.Equal(t, []int{2, 4, 0}, y.Shape())
		require.NoError(t, autograd.Sum(y, false).Backward())
		assert.Equal(t, make([]float32, 24), a2.Grad.Float32s())
		assert.Equal(t, []int{3, 0}, bn.Grad.Shape())
	})
}

// GeluLinear of a scalar was a raw runtime panic (slice bounds out of
// range in its products' flattening), which tensor.Try does not turn into
// an error; Linear refused a scalar with an *OpError, and GeluLinear now
// does the same.
func TestGeluLinearRefusesAScalar(t *testing.T) {
	tensor.WithScope(func() {
		s := autograd.Const(tensor.Scalar(tensor.CPU(), tensor.Float32, 1))
		w := konst([]float32{1, 2}, 2, 1)
		for name, op := range map[string]func(u, w, b *autograd.Var) *autograd.Var{
			"GeluLinear": autograd.GeluLinear, "GeluLinearKept": autograd.GeluLinearKept,
		} {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(func() { op(s, w, nil) }) }, name)
			require.ErrorIs(t, err, tensor.ErrShape, name)
			assert.Contains(t, err.Error(), "autograd.GeluLinear: input is a scalar", name)
		}
	})
}

// LinearCrossEntropy on empty shapes: with no classes (w of 0 rows) and
// chunkRows 0 it divided by zero sizing its chunks, with no features (C =
// 0) it divided by zero counting the rows, and with no rows it
// dereferenced a nil loss: raw runtime panics. Now no classes is an
// *OpError wrapping ErrShape, no features gives PyTorch's loss and
// gradients, and no rows gives CrossEntropy's: loss 0 (PyTorch's mean is
// NaN, the documented difference) and zero gradients, with or without a
// graph. Targets of a float dtype are refused where they are checked.
func TestLinearCrossEntropyEmptyShapes(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		h := reviewParam(t, "h", arange(0, 6), 2, 3)
		w0 := reviewParam(t, "w", nil, 0, 3)
		for _, chunk := range []int{0, 1} {
			var err error
			require.NotPanics(t, func() {
				err = tensor.Try(func() {
					autograd.LinearCrossEntropy(h, w0, tensor.FromInt32s(dev, []int32{autograd.IgnoreIndex, autograd.IgnoreIndex}, 2), chunk)
				})
			}, "chunk %d", chunk)
			require.ErrorIs(t, err, tensor.ErrShape, "chunk %d", chunk)
			assert.Contains(t, err.Error(), "no rows", "chunk %d", chunk)
		}

		// h=torch.zeros(2,0,requires_grad=True); w=torch.zeros(4,0,requires_grad=True)
		// l=F.cross_entropy(F.linear(h,w), torch.tensor([1,2])); l.backward()
		// l 1.3862943649291992 (ln 4); h.grad (2,0); w.grad (4,0)
		for _, chunk := range []int{0, 1} {
			hc := reviewParam(t, "h", nil, 2, 0)
			wc := reviewParam(t, "w", nil, 4, 0)
			var l *autograd.Var
			require.NotPanics(t, func() {
				require.NoError(t, tensor.Try(func() {
					l = autograd.LinearCrossEntropy(hc, wc, tensor.FromInt32s(dev, []int32{1, 2}, 2), chunk)
				}))
			}, "chunk %d", chunk)
			assert.InDelta(t, 1.3862943649291992, l.Item(), 1e-6)
			require.NoError(t, l.Backward())
			assert.Equal(t, []int{2, 0}, hc.Grad.Shape())
			assert.Equal(t, []int{4, 0}, wc.Grad.Shape())
		}

		// h=torch.zeros(0,3,requires_grad=True); w=torch.ones(4,3,requires_grad=True)
		// l=F.cross_entropy(F.linear(h,w), torch.tensor([],dtype=torch.long)); l.backward()
		// l nan (strata: 0, as its CrossEntropy); h.grad (0,3); w.grad zeros (4,3)
		hn := reviewParam(t, "h", nil, 0, 3)
		wn := reviewParam(t, "w", arange(1, 12), 4, 3)
		none := tensor.FromInt32s(dev, nil, 0)
		var l *autograd.Var
		require.NotPanics(t, func() {
			require.NoError(t, tensor.Try(func() { l = autograd.LinearCrossEntropy(hn, wn, none, 0) }))
		})
		assert.Equal(t, 0.0, l.Item())
		require.NoError(t, l.Backward())
		assert.Equal(t, []int{0, 3}, hn.Grad.Shape())
		assert.Equal(t, make([]float32, 12), wn.Grad.Float32s())
		ce := autograd.CrossEntropy(autograd.Linear(hn, wn, nil), none)
		assert.Equal(t, 0.0, ce.Item(), "the same as the unfused loss")
		autograd.NoGrad(func() {
			require.NotPanics(t, func() {
				require.NoError(t, tensor.Try(func() { l = autograd.LinearCrossEntropy(hn, wn, none, 0) }))
			})
		})
		assert.Equal(t, 0.0, l.Item())
		assert.False(t, l.RequiresGrad())

		err := tensor.Try(func() {
			autograd.LinearCrossEntropy(h, wn, tensor.FromFloat32s(dev, []float32{1, 2}, 2), 0)
		})
		require.ErrorIs(t, err, tensor.ErrDType)
		assert.Contains(t, err.Error(), "want int32")
	})
}

// GradCheck passed what it could not check: eps 0 (or NaN) makes every
// numeric derivative NaN, and a NaN numeric derivative compared as "not
// greater than the tolerance", so a check with a wrong gradient, or at a
// point where the function is not differentiable (√x at 0: analytic +Inf,
// numeric NaN), returned nil. torch.autograd.gradcheck fails both (NaN
// is never close). Bad steps and tolerances are now ErrArgument errors,
// a NaN on either side is a mismatch, and an f that returns nil is an
// error instead of a nil-pointer panic.
func TestGradCheckRefusesWhatItCannotCheck(t *testing.T) {
	dev := tensor.CPU()
	wrongGrad := func(xs []*autograd.Var) *autograd.Var {
		x := xs[0]
		out := tensor.Scale(x.Value, 3)
		return autograd.Record("wrong", out, []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Scale(g, 2)} // the derivative is 3
		})
	}
	tensor.WithScope(func() {
		xs := []*tensor.Tensor{tensor.FromFloat64s(dev, []float64{0.5, 2}, 2)}
		require.Error(t, autograd.GradCheck(wrongGrad, xs, nil, 1e-6, 1e-5, 1e-3), "a wrong gradient is found")
		for _, c := range []struct{ eps, atol, rtol float64 }{
			{0, 1e-5, 1e-3}, {math.NaN(), 1e-5, 1e-3}, {-1e-6, 1e-5, 1e-3}, {math.Inf(1), 1e-5, 1e-3},
			{1e-6, math.NaN(), 1e-3}, {1e-6, 1e-5, -1},
		} {
			err := autograd.GradCheck(wrongGrad, xs, nil, c.eps, c.atol, c.rtol)
			require.ErrorIs(t, err, tensor.ErrArgument, "%+v", c)
		}

		f32 := []*tensor.Tensor{tensor.FromFloat32s(dev, []float32{0.5, 2}, 2)}
		require.ErrorIs(t, autograd.GradCheck(wrongGrad, f32, nil, 1e-6, 1e-5, 1e-3), tensor.ErrDType, "checks run in float64")

		zero := []*tensor.Tensor{tensor.FromFloat64s(dev, []float64{0, 1}, 2)}
		err := autograd.GradCheck(func(xs []*autograd.Var) *autograd.Var { return autograd.Sqrt(xs[0]) }, zero, nil, 1e-6, 1e-5, 1e-3)
		require.Error(t, err, "√x is not differentiable at 0: numeric NaN, analytic +Inf")
		assert.Contains(t, err.Error(), "element 0")

		require.NotPanics(t, func() {
			err = autograd.GradCheck(func([]*autograd.Var) *autograd.Var { return nil }, xs, nil, 1e-6, 1e-5, 1e-3)
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
	})
}

// A custom op that saves its input's value for backward, as PyTorch's
// ctx.save_for_backward(x) does, or returns it as its output (an
// identity, a gradient reversal), or saves its own output: Backward
// released the saved tensors and the consumed outputs, which were the
// parameter's value itself (the next forward failed with "tensor used
// after release") or the loss the caller then read. Record now takes such
// tensors as views of their own.
func TestRecordKeepsInputsItSaves(t *testing.T) {
	tensor.WithScope(func() {
		x := reviewParam(t, "x", []float32{1, 2}, 2)
		xv := x.Value
		sq := autograd.Record("square", tensor.Mul(xv, xv), []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
			p := tensor.Mul(g, xv)
			defer p.Release()
			return []*tensor.Tensor{tensor.Scale(p, 2)}
		}, xv)
		require.NoError(t, autograd.Sum(sq, false).Backward())
		require.False(t, x.Value.Released(), "the parameter a custom op saved is the caller's")
		assert.Equal(t, []float32{2, 4}, x.Grad.Float32s())
		x.ZeroGrad()

		// class Rev(torch.autograd.Function): forward returns x, backward -g
		rev := autograd.Record("reverse", xv, []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Neg(g)}
		})
		require.NoError(t, autograd.Sum(autograd.Scale(rev, 3), false).Backward())
		require.False(t, x.Value.Released(), "an identity's output is a view of its own")
		assert.Equal(t, []float32{-3, -3}, x.Grad.Float32s())
		assert.Equal(t, []float32{1, 2}, x.Value.Float32s())
		x.ZeroGrad()

		// a loss that saves its output: readable after Backward, as a root is
		s := tensor.Sum(tensor.Exp(xv), false)
		l := autograd.Record("sumexp", s, []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
			e := tensor.Exp(xv)
			defer e.Release()
			return []*tensor.Tensor{tensor.Mul(e, g)}
		}, s)
		require.NoError(t, l.Backward())
		assert.InDelta(t, math.E+math.Exp(2), l.Item(), 1e-5)
		assert.InDeltaSlice(t, []float64{math.E, math.Exp(2)}, toF64(x.Grad.Float32s()), 1e-5)
	})
}

func toF64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// Backward twice on one graph (PyTorch: "Trying to backward through the
// graph a second time" unless retain_graph), or from a var that requires
// no gradient ("element 0 of tensors does not require grad"), or from a
// leaf: each is ErrNoGraph, and the message says which and why. It said
// only "no graph to differentiate: Var( float32 [] grad=true)": the
// consumed var had lost its name (Name, documented as the op that made
// it, was "" after Backward and for outputs recorded without a node).
func TestBackwardWithoutAGraphSaysWhy(t *testing.T) {
	tensor.WithScope(func() {
		x := reviewParam(t, "x", []float32{1, 2}, 2)
		l := autograd.Mean(autograd.Mul(x, x), false)
		require.NoError(t, l.Backward())
		assert.Equal(t, []float32{1, 2}, x.Grad.Float32s())
		err := l.Backward()
		require.ErrorIs(t, err, autograd.ErrNoGraph)
		assert.Contains(t, err.Error(), "Var(Mean float32 [] grad=true)")
		assert.Contains(t, err.Error(), "consumed by an earlier Backward")
		assert.Equal(t, "Mean", l.Name(), "a consumed var keeps the name of its op")
		assert.Equal(t, []float32{1, 2}, x.Grad.Float32s(), "a refused pass changes nothing")
		require.ErrorIs(t, l.BackwardWith(tensor.Scalar(tensor.CPU(), tensor.Float32, 1)), autograd.ErrNoGraph)

		var m *autograd.Var
		autograd.NoGrad(func() { m = autograd.Sum(x, false) })
		err = m.Backward()
		require.ErrorIs(t, err, autograd.ErrNoGraph)
		assert.Contains(t, err.Error(), "no input of Sum required gradients")
		assert.Equal(t, "Sum", m.Name())
		err = autograd.Sum(konst([]float32{1}, 1), false).Backward()
		assert.Contains(t, err.Error(), "Var(Sum float32 [] grad=false)")

		err = x.Backward()
		require.ErrorIs(t, err, autograd.ErrNoGraph)
		assert.Contains(t, err.Error(), "leaf")
		assert.Equal(t, "x", x.Name())
	})
}

// Non-scalar roots: Backward refuses them (PyTorch: "grad can be
// implicitly created only for scalar outputs") and BackwardWith takes the
// seed, checked for shape, dtype, nil and release before the pass; the
// refused calls leave the graph intact for a correct one.
func TestNonScalarRootNeedsASeed(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		x := reviewParam(t, "x", []float32{1, 2, 3}, 3)
		y := autograd.Mul(x, x)
		err := y.Backward()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "want a scalar, have shape [3]")
		require.Error(t, y.BackwardWith(nil))
		require.Error(t, y.BackwardWith(tensor.Ones(dev, tensor.Float32, 1)))
		require.Error(t, y.BackwardWith(tensor.Ones(dev, tensor.Float64, 3)))
		released := tensor.Ones(dev, tensor.Float32, 3)
		released.Release()
		require.ErrorIs(t, y.BackwardWith(released), tensor.ErrReleased)
		assert.Nil(t, x.Grad)

		// x=torch.tensor([1.,2.,3.],requires_grad=True); (x*x).backward(torch.tensor([1.,-1.,.5]))
		// x.grad [2,-4,3]
		seed := tensor.FromFloat32s(dev, []float32{1, -1, 0.5}, 3)
		require.NoError(t, y.BackwardWith(seed))
		assert.Equal(t, []float32{2, -4, 3}, x.Grad.Float32s())
		assert.Equal(t, []float32{1, -1, 0.5}, seed.Float32s(), "the seed is read, not consumed")

		// a one-element var (shape [1]) is a scalar
		x.ZeroGrad()
		require.NoError(t, autograd.Sum(autograd.Reshape(x, 1, 3), false, 1).Backward() /* shape [1] */)
		assert.Equal(t, []float32{1, 1, 1}, x.Grad.Float32s())
	})
}

// Gradients of views, of broadcasting (reduced back to each input's
// shape) and of a var used several times, against PyTorch.
func TestViewAndBroadcastGradientsAgainstPyTorch(t *testing.T) {
	tensor.WithScope(func() {
		// x=torch.arange(24.).reshape(2,3,4).requires_grad_(); w=torch.arange(16.)-8
		// (x.narrow(1,1,2).permute(2,0,1).reshape(-1)*w).sum().backward()
		x := reviewParam(t, "x", arange(0, 24), 2, 3, 4)
		y := autograd.Reshape(autograd.Permute(autograd.Narrow(x, 1, 1, 2), 2, 0, 1), -1)
		require.NoError(t, dot(y, konst(arange(-8, 16), 16)).Backward())
		assert.Equal(t, []float32{0, 0, 0, 0, -8, -4, 0, 4, -7, -3, 1, 5, 0, 0, 0, 0, -6, -2, 2, 6, -5, -1, 3, 7}, x.Grad.Float32s())

		// x=torch.arange(6.).reshape(2,3).requires_grad_()
		// z=(x.t().reshape(6)*torch.arange(6.)).reshape(3,2).sum(0)
		// (z*torch.tensor([1.,-2.])).sum().backward()  -> [0,2,4,-2,-6,-10]
		x2 := reviewParam(t, "x", arange(0, 6), 2, 3)
		z := autograd.Sum(autograd.Reshape(autograd.Mul(autograd.Reshape(autograd.Transpose(x2, 0, 1), 6), konst(arange(0, 6), 6)), 3, 2), false, 0)
		require.NoError(t, dot(z, konst([]float32{1, -2}, 2)).Backward())
		assert.Equal(t, []float32{0, 2, 4, -2, -6, -10}, x2.Grad.Float32s())

		// x=torch.arange(24.).reshape(2,3,4).requires_grad_(); W=lambda n,*s:(torch.arange(n*1.)-3).reshape(*s)
		// (x.sum((-1,0))*W(3,3)).sum() -> [-3]*4+[-2]*4+[-1]*4, twice
		// (x.mean((-1,0))*W(3,3)).sum() -> the same over 8
		// (x.permute(-1,0,1)*W(24,4,2,3)).sum() -> below
		x3 := reviewParam(t, "x", arange(0, 24), 2, 3, 4)
		require.NoError(t, dot(autograd.Sum(x3, false, -1, 0), konst(arange(-3, 3), 3)).Backward())
		row := []float32{-3, -3, -3, -3, -2, -2, -2, -2, -1, -1, -1, -1}
		assert.Equal(t, append(row, row...), x3.Grad.Float32s())
		x3.ZeroGrad()
		require.NoError(t, dot(autograd.Mean(x3, false, -1, 0), konst(arange(-3, 3), 3)).Backward())
		for i, g := range x3.Grad.Float32s() {
			assert.Equal(t, row[i%12]/8, g)
		}
		x3.ZeroGrad()
		require.NoError(t, dot(autograd.Permute(x3, -1, 0, 1), konst(arange(-3, 24), 4, 2, 3)).Backward())
		assert.Equal(t, []float32{-3, 3, 9, 15, -2, 4, 10, 16, -1, 5, 11, 17, 0, 6, 12, 18, 1, 7, 13, 19, 2, 8, 14, 20}, x3.Grad.Float32s())

		// a=torch.tensor([[1.],[2.],[3.]],requires_grad=True); b=torch.tensor([[.5,-1.,2.,4.]],requires_grad=True)
		// wt=torch.arange(12.).reshape(3,4); ((a OP b)*wt).sum().backward()
		for _, c := range []struct {
			name   string
			op     func(a, b *autograd.Var) *autograd.Var
			ga, gb []float32
		}{
			{"add", autograd.Add, []float32{6, 22, 38}, []float32{12, 15, 18, 21}},
			{"sub", autograd.Sub, []float32{6, 22, 38}, []float32{-12, -15, -18, -21}},
			{"mul", autograd.Mul, []float32{15, 37, 59}, []float32{32, 38, 44, 50}},
			{"div", autograd.Div, []float32{0.75, 7.75, 14.75}, []float32{-128, -38, -11, -3.125}},
		} {
			a := reviewParam(t, "a", []float32{1, 2, 3}, 3, 1)
			b := reviewParam(t, "b", []float32{0.5, -1, 2, 4}, 1, 4)
			require.NoError(t, dot(c.op(a, b), konst(arange(0, 12), 3, 4)).Backward(), c.name)
			assert.Equal(t, c.ga, a.Grad.Float32s(), c.name)
			assert.Equal(t, c.gb, b.Grad.Float32s(), c.name)
		}

		// p=torch.arange(6.).reshape(2,1,3).requires_grad_(); q=torch.tensor([[1.],[2.],[-1.],[.5]],requires_grad=True)
		// ((p*q)*torch.arange(24.).reshape(2,4,3)).sum().backward()
		p := reviewParam(t, "p", arange(0, 6), 2, 1, 3)
		q := reviewParam(t, "q", []float32{1, 2, -1, 0.5}, 4, 1)
		require.NoError(t, dot(autograd.Mul(p, q), konst(arange(0, 24), 2, 4, 3)).Backward())
		assert.Equal(t, []float32{4.5, 7, 9.5, 34.5, 37, 39.5}, p.Grad.Float32s())
		assert.Equal(t, []float32{163, 208, 253, 298}, q.Grad.Float32s())

		// x used directly and through a shared intermediate:
		// x=torch.tensor([1.,2.,3.],requires_grad=True); h=torch.tanh(x)
		// (h*h+h*x+x).sum().backward() -> [2.8212685585021973, 2.2415480613708496, 2.0442869663238525]
		xs := reviewParam(t, "x", []float32{1, 2, 3}, 3)
		h := autograd.Tanh(xs)
		require.NoError(t, autograd.Sum(autograd.Add(autograd.Add(autograd.Mul(h, h), autograd.Mul(h, xs)), xs), false).Backward())
		assert.InDeltaSlice(t, []float64{2.8212685585021973, 2.2415480613708496, 2.0442869663238525}, toF64(xs.Grad.Float32s()), 1e-6)

		// Narrow pieces of a computed var, assembled in place (narrow.go):
		// x=torch.arange(24.).reshape(2,3,4).requires_grad_(); h=x*2
		// a=h.narrow(-1,0,1); b=h.narrow(-1,2,2); c=h.narrow(1,1,1)
		// ((a*W(6,2,3,1)).sum()+(b*W(12,2,3,2)).sum()+(c*W(8,2,1,4)).sum()).backward()
		xn := reviewParam(t, "x", arange(0, 24), 2, 3, 4)
		hn := autograd.Scale(xn, 2)
		l := autograd.Add(autograd.Add(
			dot(autograd.Narrow(hn, -1, 0, 1), konst(arange(-3, 6), 2, 3, 1)),
			dot(autograd.Narrow(hn, -1, 2, 2), konst(arange(-3, 12), 2, 3, 2))),
			dot(autograd.Narrow(hn, 1, 1, 1), konst(arange(-3, 8), 2, 1, 4)))
		require.NoError(t, l.Backward())
		assert.Equal(t, []float32{-6, 0, -6, -4, -10, -4, -4, 0, -2, 0, 2, 4, 0, 0, 6, 8, 4, 4, 16, 20, 4, 0, 14, 16}, xn.Grad.Float32s())
	})
}

// NaN and infinities flow through the engine as PyTorch's do (the
// element-wise derivatives are the kernels'; nothing in between masks a
// NaN or turns an Inf into a number).
func TestNaNAndInfGradientsAgainstPyTorch(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tensor.WithScope(func() {
		// x=torch.tensor(vals,requires_grad=True); f(x).sum().backward(); x.grad
		for _, c := range []struct {
			name       string
			f          func(*autograd.Var) *autograd.Var
			x, y, grad []float32
		}{
			{"sqrt", autograd.Sqrt, []float32{0, 4, -1, inf, nan}, []float32{0, 2, nan, inf, nan}, []float32{inf, 0.25, nan, 0, nan}},
			{"log", autograd.Log, []float32{0, 1, -1, inf, nan}, []float32{-inf, 0, nan, inf, nan}, []float32{inf, 1, -1, 0, nan}},
			{"exp", autograd.Exp, []float32{1000, -inf, nan, 0}, []float32{inf, 0, nan, 1}, []float32{inf, 0, nan, 1}},
			{"tanh", autograd.Tanh, []float32{nan, inf, -inf, 0}, []float32{nan, 1, -1, 0}, []float32{nan, 0, 0, 1}},
			{"x*x", func(x *autograd.Var) *autograd.Var { return autograd.Mul(x, x) }, []float32{inf, nan, -inf}, []float32{inf, nan, inf}, []float32{inf, nan, -inf}},
		} {
			x := reviewParam(t, "x", c.x, len(c.x))
			y := c.f(x)
			assertSameFloats(t, c.y, y.Value.Float32s(), c.name)
			require.NoError(t, autograd.Sum(y, false).Backward(), c.name)
			assertSameFloats(t, c.grad, x.Grad.Float32s(), c.name)
		}
		// x=torch.tensor([1.,0.,-1.],requires_grad=True); d=torch.zeros(3,requires_grad=True)
		// (x/d).sum().backward(): x.grad [inf,inf,inf], d.grad [-inf,nan,inf]
		x := reviewParam(t, "x", []float32{1, 0, -1}, 3)
		d := reviewParam(t, "d", []float32{0, 0, 0}, 3)
		require.NoError(t, autograd.Sum(autograd.Div(x, d), false).Backward())
		assertSameFloats(t, []float32{inf, inf, inf}, x.Grad.Float32s(), "div x")
		assertSameFloats(t, []float32{-inf, nan, inf}, d.Grad.Float32s(), "div d")
		// A NaN gradient accumulated with a finite one stays NaN.
		y := reviewParam(t, "y", []float32{-1, 4}, 2)
		require.NoError(t, autograd.Sum(autograd.Add(autograd.Sqrt(y), y), false).Backward())
		assertSameFloats(t, []float32{nan, 1.25}, y.Grad.Float32s(), "accumulated")
	})
}

// assertSameFloats compares element by element, NaN equal to NaN.
func assertSameFloats(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		if math.IsNaN(float64(want[i])) {
			assert.True(t, math.IsNaN(float64(got[i])), "%s element %d: want NaN, got %v", msg, i, got[i])
		} else {
			assert.Equal(t, want[i], got[i], "%s element %d", msg, i)
		}
	}
}

// Zero-size tensors differentiate to zero-size gradients.
func TestZeroSizeGradients(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		for name, c := range map[string]struct {
			f     func(*autograd.Var) *autograd.Var
			shape []int
		}{
			"Softmax":     {autograd.Softmax, []int{2, 0}},
			"LogSoftmax":  {autograd.LogSoftmax, []int{0, 3}},
			"Mean axis 0": {func(x *autograd.Var) *autograd.Var { return autograd.Mean(x, false, 0) }, []int{0, 3}},
			"MatMul":      {func(x *autograd.Var) *autograd.Var { return autograd.MatMul(x, konst(arange(0, 6), 3, 2)) }, []int{0, 4, 3}},
			"Narrow":      {func(x *autograd.Var) *autograd.Var { return autograd.Narrow(x, 0, 1, 0) }, []int{3, 2}},
			"Permute":     {func(x *autograd.Var) *autograd.Var { return autograd.Permute(x, 1, 0) }, []int{0, 3}},
			"CrossEntropy": {func(x *autograd.Var) *autograd.Var {
				return autograd.CrossEntropy(x, tensor.FromInt32s(dev, nil, 0))
			}, []int{0, 3}},
			"Embedding": {func(x *autograd.Var) *autograd.Var {
				return autograd.Embedding(x, tensor.FromInt32s(dev, nil, 0))
			}, []int{4, 3}},
			"CausalAttention": {func(x *autograd.Var) *autograd.Var { return autograd.CausalAttention(x, x, x, 0, 0, 0) }, []int{1, 2, 0, 4}},
		} {
			x := autograd.Param(tensor.Ones(dev, tensor.Float32, c.shape...), "x")
			require.NoError(t, tensor.Try(func() {
				require.NoError(t, autograd.Sum(c.f(x), false).Backward(), name)
			}), name)
			require.NotNil(t, x.Grad, name)
			assert.Equal(t, c.shape, x.Grad.Shape(), name)
			for _, g := range x.Grad.Float32s() {
				assert.Equal(t, float32(0), g, name)
			}
			x.ZeroGrad()
			x.Value.Release()
		}
	})
}

// Deep graphs: the engine orders and steps nodes without recursion, so a
// 10,000-op chain, and a 10,000-level diamond (each level uses the one
// below twice: 2^10000 paths), differentiate without growing the stack
// and in time linear in the nodes.
func TestDeepGraphs(t *testing.T) {
	const depth = 10000
	tensor.WithScope(func() {
		// x=torch.tensor([.5,-1.],requires_grad=True); y=x
		// for _ in range(10000): y=y*1.0001+0.001
		// y.sum().backward(): x.grad [2.7185957431793213]*2; y [18.543365478515625, 14.465509414672852]
		x := reviewParam(t, "x", []float32{0.5, -1}, 2)
		y := x
		for range depth {
			y = autograd.Affine(y, 1.0001, 0.001)
		}
		l := autograd.Sum(y.Retain(), false)
		require.NoError(t, l.Backward())
		assert.InDeltaSlice(t, []float64{2.7185957431793213, 2.7185957431793213}, toF64(x.Grad.Float32s()), 1e-3)
		assert.InDeltaSlice(t, []float64{18.543365478515625, 14.465509414672852}, toF64(y.Value.Float32s()), 1e-3)
		y.ZeroGrad()

		// for _ in range(10000): y=(y+y)*0.5  -> x.grad [1, 1]
		x2 := reviewParam(t, "x", []float32{0.5, -1}, 2)
		y = x2
		for range depth {
			y = autograd.Scale(autograd.Add(y, y), 0.5)
		}
		require.NoError(t, autograd.Sum(y, false).Backward())
		assert.Equal(t, []float32{1, 1}, x2.Grad.Float32s())
	})
}

// Independent graphs differentiated at once from goroutines, each in its
// own tensor.Ctx, reading one shared frozen weight: each goroutine's
// gradients equal those of the same step run alone (run with -race).
func TestConcurrentBackwardOnIndependentGraphs(t *testing.T) {
	dev := tensor.CPU()
	vals := arange(-20, 48)
	for i := range vals {
		vals[i] *= 0.05
	}
	f := tensor.NewCtx().FromFloat32s(dev, vals, 8, 6)
	tensor.Keep(f) // a kept tensor belongs to no Ctx: every goroutine may read it
	defer f.Release()
	shared := autograd.Const(f)
	step := func(c *tensor.Ctx, seed int) []float32 {
		w := autograd.Param(c.FromFloat32s(dev, arange(float32(seed), 20), 5, 4), "w")
		defer w.Value.Release()
		defer w.ZeroGrad()
		var grad []float32
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(dev, arange(float32(-seed), 24), 4, 6))
			h := autograd.Linear(autograd.Scale(x, 0.1), shared, nil) // (4, 8)
			parts := autograd.Split(h, 4, 1)
			h = autograd.Mul(autograd.Tanh(parts[0]), parts[1])
			logits := autograd.Linear(autograd.Add(h, h), autograd.Scale(w, 0.01), nil)
			l := autograd.CrossEntropy(logits, c.FromInt32s(dev, []int32{0, 1, 2, 3}, 4))
			require.NoError(t, l.Backward())
			grad = w.Grad.Float32s()
		})
		return grad
	}
	const workers = 8
	want := make([][]float32, workers)
	for i := range workers {
		want[i] = step(tensor.NewCtx(), i)
	}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tensor.NewCtx()
			for range 10 {
				assert.Equal(t, want[i], step(c, i))
			}
		}()
	}
	wg.Wait()
}

// Inputs released before Backward: a Const that a backward reads fails
// the pass with ErrReleased naming the tensor, instead of reading freed
// memory; a parameter released by its owner still gets its gradient
// (nothing reads its value), and a pass from a scope already closed
// fails the same way.
func TestReleasedInputsFailBackward(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		x := reviewParam(t, "x", []float32{1, 2}, 2)
		k := konst([]float32{3, 4}, 2)
		l := dot(x, k)
		k.Value.Release()
		err := l.Backward()
		require.ErrorIs(t, err, tensor.ErrReleased)
		assert.Contains(t, err.Error(), "was released")
		assert.Nil(t, x.Grad)

		p := autograd.Param(tensor.FromFloat32s(dev, []float32{1, 2}, 2), "p")
		l = autograd.Sum(autograd.Scale(p, 2), false)
		p.Value.Release()
		require.NoError(t, l.Backward())
		assert.Equal(t, []float32{2, 2}, p.Grad.Float32s())
		p.ZeroGrad()

		// Drop of a value a backward reads: ErrReleased, not a wrong gradient.
		e := autograd.Exp(x)
		m := dot(e, konst([]float32{1, 1}, 2))
		e.Drop()
		require.ErrorIs(t, m.Backward(), tensor.ErrReleased)

		var loss *autograd.Var
		tensor.WithScope(func() { loss = dot(autograd.Exp(x), konst([]float32{1, 1}, 2)) })
		require.ErrorIs(t, loss.Backward(), tensor.ErrReleased)
		assert.Nil(t, x.Grad)
	})
}

// A Const turned into a leaf that requires gradients, and integer
// inputs: only floats take gradients, an integer Cast is cut from the
// graph, and mixing an int32 tensor into float arithmetic is an ErrDType
// error, as in PyTorch.
func TestConstLeavesAndIntegerInputs(t *testing.T) {
	dev := tensor.CPU()
	tensor.WithScope(func() {
		// x=torch.tensor([1.,2.],requires_grad=True); (torch.exp(x)*x).sum().backward()
		// x.grad [5.436563491821289, 22.16716766357422]
		x := konst([]float32{1, 2}, 2)
		x.SetRequiresGrad(true)
		defer x.ZeroGrad()
		require.NoError(t, dot(autograd.Exp(x), x).Backward())
		assert.InDeltaSlice(t, []float64{5.436563491821289, 22.16716766357422}, toF64(x.Grad.Float32s()), 1e-5)

		ids := autograd.Const(tensor.FromInt32s(dev, []int32{1, 2}, 2))
		err := tensor.Try(func() { autograd.Param(ids.Value, "ids") })
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() { autograd.Add(x, ids) })
		require.ErrorIs(t, err, tensor.ErrDType)

		// x=torch.tensor([1.5,2.,3.],requires_grad=True); f=x.int().float()
		// f.requires_grad False; (x*f).sum().backward(): x.grad [1,2,3]
		p := reviewParam(t, "p", []float32{1.5, 2, 3}, 3)
		i := autograd.Cast(p, tensor.Int32)
		f := autograd.Cast(i, tensor.Float32)
		assert.False(t, i.RequiresGrad())
		assert.False(t, f.RequiresGrad())
		require.NoError(t, dot(p, f).Backward())
		assert.Equal(t, []float32{1, 2, 3}, p.Grad.Float32s())
		err = i.Backward()
		require.ErrorIs(t, err, autograd.ErrNoGraph)
		assert.Contains(t, err.Error(), "not differentiable")
	})
}

// Split of an empty axis returned no pieces, where Tensor.Split and
// torch.split return one empty piece: code taking the first piece (a
// batch split into micro-batches) hit an index out of range.
func TestSplitOfAnEmptyAxis(t *testing.T) {
	tensor.WithScope(func() {
		// x=torch.zeros(0,3,requires_grad=True); p=torch.split(x,2,0)
		// len(p) 1, p[0].shape (0,3); p[0].sum().backward(): x.grad (0,3)
		x := reviewParam(t, "x", nil, 0, 3)
		parts := autograd.Split(x, 2, 0)
		require.Len(t, parts, 1)
		assert.Equal(t, []int{0, 3}, parts[0].Shape())
		assert.Len(t, x.Value.Split(2, 0), 1, "as Tensor.Split")
		require.NoError(t, autograd.Sum(parts[0], false).Backward())
		assert.Equal(t, []int{0, 3}, x.Grad.Shape())
		assert.Len(t, autograd.Split(x, 2, -1), 2, "a non-empty axis as before")
	})
}

// enterHook is an OpHook whose Enter hands back outs for every op.
type enterHook struct{ outs func() []*tensor.Tensor }

func (h enterHook) Enter(string) []*tensor.Tensor   { return h.outs() }
func (h enterHook) Leave(string, ...*tensor.Tensor) {}

// An OpHook (exported for selective checkpointing) that hands back the
// wrong number of outputs: one for LayerNorm's three was a raw "index out
// of range" panic, as was an empty non-nil result; two for Softmax's one
// were taken silently, and a nil output surfaced later as Record's "nil
// output". Each is now an *tensor.OpError wrapping ErrArgument naming
// the op and the hook, and the outputs handed over are released.
func TestOpHookWithTheWrongOutputs(t *testing.T) {
	dev := tensor.CPU()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Ones(dev, tensor.Float32, 2, 3))
		var handed []*tensor.Tensor
		hand := func(n int, nilAt int) func() []*tensor.Tensor {
			return func() []*tensor.Tensor {
				outs := make([]*tensor.Tensor, n)
				for i := range outs {
					if i != nilAt {
						outs[i] = c.Ones(dev, tensor.Float32, 2, 3)
						handed = append(handed, outs[i])
					}
				}
				return outs
			}
		}
		for _, tc := range []struct {
			name, op string
			f        func()
			outs     func() []*tensor.Tensor
			msg      string
		}{
			{"LayerNorm given 1", "LayerNorm", func() { autograd.LayerNorm(x, nil, nil, 1e-5) }, hand(1, -1), "returned 1 outputs, want 3"},
			{"Softmax given 0", "Softmax", func() { autograd.Softmax(x) }, hand(0, -1), "returned 0 outputs, want 1"},
			{"Softmax given 2", "Softmax", func() { autograd.Softmax(x) }, hand(2, -1), "returned 2 outputs, want 1"},
			{"MatMul given nil", "MatMul", func() { autograd.MatMul(x, autograd.Transpose(x, 0, 1)) }, hand(1, 0), "output 0 nil"},
		} {
			handed = nil
			var err error
			require.NotPanics(t, func() {
				err = tensor.Try(func() { autograd.WithOpHook(c, enterHook{tc.outs}, tc.f) })
			}, tc.name)
			require.ErrorIs(t, err, tensor.ErrArgument, tc.name)
			assert.Contains(t, err.Error(), "autograd."+tc.op+": op hook autograd_test.enterHook", tc.name)
			assert.Contains(t, err.Error(), tc.msg, tc.name)
			for _, h := range handed {
				assert.True(t, h.Released(), "%s: the outputs handed over are released", tc.name)
			}
		}
	})
}

// A BackwardWith seed on another device than the var (a second CPU
// device stands in for a GPU) was taken, and the pass failed at the first
// leaf with "backward of Reshape gave a gradient on cpu#2": the error
// blamed the op for the caller's seed. BackwardWith now refuses it first,
// naming itself, with ErrDevice; the graph is left for a correct seed.
func TestBackwardWithSeedOnAnotherDevice(t *testing.T) {
	tensor.WithScope(func() {
		x := reviewParam(t, "x", []float32{1, 2}, 2)
		y := autograd.Reshape(x, 2, 1)
		other := tensor.NewCPUDevice(tensor.CPU().Memory())
		err := y.BackwardWith(tensor.Ones(other, tensor.Float32, 2, 1))
		require.ErrorIs(t, err, tensor.ErrDevice)
		assert.Contains(t, err.Error(), "autograd: BackwardWith of Reshape: gradient on "+other.String()+" for a value on cpu")
		assert.Nil(t, x.Grad)
		require.NoError(t, y.BackwardWith(tensor.Ones(tensor.CPU(), tensor.Float32, 2, 1)))
		assert.Equal(t, []float32{1, 1}, x.Grad.Float32s())
	})
}

// CausalAttention with a dropout probability of NaN or below 0 ran
// without dropout ("if p > 0"), silently, where FusedCausalAttention, the
// same function by its doc, and Dropout refuse it. It is now the same
// *tensor.OpError wrapping ErrArgument; p = 1 is refused up front too.
func TestCausalAttentionRefusesABadDropoutProbability(t *testing.T) {
	tensor.WithScope(func() {
		q := konst(arange(0, 8), 1, 1, 2, 4)
		for _, p := range []float64{math.NaN(), -0.1, 1, 2} {
			for name, op := range map[string]func(q, k, v *autograd.Var, p float64, seed, offset uint64) *autograd.Var{
				"CausalAttention": autograd.CausalAttention, "FusedCausalAttention": autograd.FusedCausalAttention,
			} {
				err := tensor.Try(func() { op(q, q, q, p, 1, 0) })
				require.ErrorIs(t, err, tensor.ErrArgument, "%s p=%v", name, p)
				assert.Contains(t, err.Error(), "not in [0, 1)", "%s p=%v", name, p)
			}
		}
		assert.Equal(t, []int{1, 1, 2, 4}, autograd.CausalAttention(q, q, q, 0, 1, 0).Shape())
	})
}

// A nil function given to NoGrad, NoGradIn, WithOpHook, AsLeaves or
// WithOrphanFloor was a raw nil-function call panic, which tensor.Try
// passes on; tensor's WithScope and amp's Autocast make it an
// *tensor.OpError wrapping ErrArgument, and so do these now. The grad
// mode is left as it was, and AsLeaves' vars keep their graph.
func TestNilFunctionsAreOpErrors(t *testing.T) {
	c := tensor.NewCtx()
	x := autograd.Param(c.Ones(tensor.CPU(), tensor.Float32), "x")
	defer x.Value.Release()
	var y *autograd.Var
	c.WithScope(func() { y = autograd.Mul(x, autograd.Const(c.Ones(tensor.CPU(), tensor.Float32))) })
	for name, f := range map[string]func(){
		"NoGrad":          func() { autograd.NoGrad(nil) },
		"NoGradIn":        func() { autograd.NoGradIn(c, nil) },
		"WithOpHook":      func() { autograd.WithOpHook(c, nil, nil) },
		"AsLeaves":        func() { autograd.AsLeaves([]*autograd.Var{y}, nil) },
		"WithOrphanFloor": func() { autograd.WithOrphanFloor(c, 0, nil) },
	} {
		var err error
		require.NotPanics(t, func() { err = tensor.Try(f) }, name)
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		assert.Contains(t, err.Error(), "nil fn", name)
	}
	assert.True(t, autograd.GradEnabledIn(c))
	assert.True(t, autograd.GradEnabled())
	assert.False(t, y.IsLeaf(), "AsLeaves left y's node as it was")
}

// Running out of memory at any allocation of a step (forward or
// backward, plain or under autocast: embedding, layer norm, linear,
// Narrow pieces assembled in place, both cross-entropies) is an error
// wrapping memory.ErrOutOfMemory, and once the step's scope has closed
// and the gradients are zeroed nothing is left allocated (a device of its
// own, whose bytes no other test moves).
func TestOutOfMemoryAnywhereLeaksNothing(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	dev := tensor.NewCPUDevice(m)
	c := tensor.NewCtx()
	mk := func(name string, n int, shape ...int) *autograd.Var {
		p := autograd.Param(c.FromFloat32s(dev, arange(-3, n), shape...), name)
		t.Cleanup(func() {
			p.ZeroGrad()
			p.Value.Release()
		})
		return p
	}
	w, b, emb, lnw := mk("w", 24, 6, 4), mk("b", 6, 6), mk("emb", 20, 5, 4), mk("lnw", 4, 4)
	ps := []*autograd.Var{w, b, emb, lnw}
	step := func(autocast bool) error {
		var err error
		if terr := tensor.Try(func() {
			c.WithScope(func() {
				ids := c.FromInt32s(dev, []int32{0, 3, 4, 1, 1, 2}, 2, 3)
				build := func() *autograd.Var {
					x := autograd.LayerNorm(autograd.Embedding(emb, ids), lnw, nil, 1e-5)
					parts := autograd.Split(autograd.Linear(x, w, b), 3, -1)
					y := autograd.Reshape(autograd.Mul(autograd.Tanh(parts[0]), parts[1]), 6, 3)
					l := autograd.CrossEntropy(y, c.FromInt32s(dev, []int32{0, 1, 2, 0, 1, 2}, 6))
					return autograd.Add(l, autograd.LinearCrossEntropy(x, w, c.FromInt32s(dev, []int32{0, 1, 2, 5, 4, 3}, 2, 3), 2))
				}
				var l *autograd.Var
				if autocast {
					amp.Autocast(c, tensor.BFloat16, func() { l = build() })
				} else {
					l = build()
				}
				err = l.Backward()
			})
		}); terr != nil {
			return terr
		}
		return err
	}
	for _, autocast := range []bool{false, true} {
		require.NoError(t, step(autocast))
		for _, p := range ps {
			p.ZeroGrad()
		}
		base := m.InUse()
		failures := 0
		for k := int64(1); ; k++ {
			m.FailAllocation(k)
			err := step(autocast)
			m.FailAllocation(0)
			for _, p := range ps {
				p.ZeroGrad()
			}
			require.Equal(t, base, m.InUse(), "autocast %v, allocation %d failing: %v", autocast, k, err)
			if err == nil {
				break
			}
			require.ErrorIs(t, err, memory.ErrOutOfMemory, "autocast %v, allocation %d", autocast, k)
			failures++
		}
		assert.Greater(t, failures, 40, "autocast %v: every allocation of the step was tried", autocast)
	}
}

// TestRecordAliasOfKeptParameterIsScoped: the view Record takes of a kept
// parameter returned as an identity op's output belonged to no scope: a
// graph never differentiated (evaluation with recording on) kept the
// parameter's storage alive after its Release, until the garbage
// collector's safety net. It joins the recording context's scope now.
func TestRecordAliasOfKeptParameterIsScoped(t *testing.T) {
	m := tensor.CPU().Memory()
	before := m.Stats().Total.Requested.Current
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 1024)
	require.NoError(t, err)
	p := autograd.Param(w, "w")
	c := tensor.NewCtx()
	c.WithScope(func() {
		c.WithScope(func() { // an op of c's, so that the recording is c's
			x := c.Ones(tensor.CPU(), tensor.Float32, 1024)
			y := autograd.Record("identity", w, []*autograd.Var{p, autograd.Const(x)}, func(g *tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{g.Alias(), nil}
			})
			require.NotSame(t, w, y.Value)
		})
	})
	w.Release()
	require.Equal(t, before, m.Stats().Total.Requested.Current, "the parameter's storage outlived its Release")
}
