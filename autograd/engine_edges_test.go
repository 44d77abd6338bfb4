package autograd_test

// Edges of the engine's public API: graphs consumed by an earlier
// Backward, vars used twice, broadcasting, views of leaves.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// leaf64 is a float64 leaf that requires gradients, its value owned by
// c's innermost scope (as GradCheck's inputs are); the caller ZeroGrads it.
func leaf64(c *tensor.Ctx, data []float64, shape ...int) *autograd.Var {
	x := autograd.Param(c.FromFloat64s(tensor.CPU(), data, shape...), "x")
	c.Adopt(x.Value)
	return x
}

// A graph reaching a var whose own graph an earlier Backward consumed
// (two losses over one intermediate, without PyTorch's retain_graph) is
// ErrNoGraph, as the error's doc says, and changes nothing: the consumed
// var is not a leaf to keep a Grad in (a kept tensor nothing releases),
// and the leaves below it are not silently left without their share.
func TestBackwardThroughConsumedGraph(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := leaf64(c, []float64{1, 2, 3}, 3)
		defer x.ZeroGrad()
		h := autograd.Scale(x, 2)
		l1 := autograd.Sum(h, false)
		l2 := autograd.Sum(autograd.Add(h, h), false) // reads no value of h
		require.NoError(t, l1.Backward())
		require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())

		err := l2.Backward()
		require.ErrorIs(t, err, autograd.ErrNoGraph)
		require.Nil(t, h.Grad, "h is no leaf: it keeps no gradient")
		require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())

		// The root of the first pass, used again.
		l3 := autograd.Mul(l1, autograd.Sum(x, false))
		require.ErrorIs(t, l3.Backward(), autograd.ErrNoGraph)
		require.Nil(t, l1.Grad)
		require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())
	})
	require.Zero(t, c.BytesInUse())
}

// An integer output (a float var cast to int32, as ids are made) is not
// differentiable: it requires no gradient, as in PyTorch, and a loss
// that also reaches the leaf through it gets the leaf's gradient from its
// float paths alone. Backward used to panic (a runtime panic, not an
// error) handing the cast an int32 gradient.
func TestIntegerOutputIsNotDifferentiable(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := leaf64(c, []float64{1.5, 2.5, -3.2}, 3)
		defer x.ZeroGrad()
		ids := autograd.Cast(x, tensor.Int32)
		require.False(t, ids.RequiresGrad())
		require.True(t, ids.IsLeaf())
		back := autograd.Cast(ids, tensor.Float64)
		require.False(t, back.RequiresGrad())
		l := autograd.Add(autograd.Sum(autograd.Scale(x, 2), false), autograd.Sum(back, false))
		var err error
		require.NotPanics(t, func() { err = l.Backward() })
		require.NoError(t, err)
		require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())
		require.Equal(t, []int32{1, 2, -3}, ids.Value.Int32s())
	})
	require.Zero(t, c.BytesInUse())
}

// A custom op whose backward hands its output gradient on as it is (a
// straight-through estimator; PyTorch's Function.backward may return
// grad_output) works whether or not its output is retained: the engine
// released that gradient as one of the op's results and then read it
// again for the retained var's Grad (tensor.ErrReleased).
func TestCustomBackwardReturnsItsGradient(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := leaf64(c, []float64{0.4, 1.6, -2.5}, 3)
		defer x.ZeroGrad()
		for _, retain := range []bool{false, true} {
			x.ZeroGrad()
			// round(x) forward, identity backward
			r := autograd.Record("STE", c.FromFloat64s(tensor.CPU(), []float64{0, 2, -2}, 3), []*autograd.Var{x},
				func(g *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{g} })
			if retain {
				r.Retain()
			}
			w := autograd.Const(c.FromFloat64s(tensor.CPU(), []float64{1, 2, 3}, 3))
			require.NoError(t, autograd.Sum(autograd.Mul(r, w), false).Backward(), "retain %v", retain)
			require.Equal(t, []float64{1, 2, 3}, x.Grad.Float64s(), "retain %v", retain)
			if retain {
				require.Equal(t, []float64{1, 2, 3}, r.Grad.Float64s())
				r.ZeroGrad()
			}
		}
	})
	require.Zero(t, c.BytesInUse())
}
