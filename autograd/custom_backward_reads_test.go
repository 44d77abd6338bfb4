package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// A custom op whose backward returns, as a gradient, a tensor the op
// holds (an input's value, its saved tensor, its output), as PyTorch's
// Function.backward may return what it saved: the engine takes a view of
// its own and leaves the tensor as it was. It used to release it with the
// op's other results: a parameter's value was gone after Backward, a
// retained graph's second pass read its released saved tensor
// (tensor.ErrReleased), and a loss whose backward returned its value
// could not be read after Backward.
func TestCustomBackwardMayReturnWhatItHolds(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	c.WithScope(func() {
		// f(x) = x²/2 at a seed of ones: the gradient is x itself.
		x := leaf64(c, []float64{0.5, -1, 2}, 3)
		defer x.ZeroGrad()
		sq := autograd.Record("HalfSquare", tensor.Scale(tensor.Mul(x.Value, x.Value), 0.5), []*autograd.Var{x},
			func(*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{x.Value} })
		require.NoError(t, sq.BackwardWith(c.Full(cpu, tensor.Float64, 1, 3)))
		require.False(t, x.Value.Released(), "the parameter's value")
		require.Equal(t, []float64{0.5, -1, 2}, x.Value.Float64s())
		require.Equal(t, []float64{0.5, -1, 2}, x.Grad.Float64s())
		x.ZeroGrad()

		// A gradient computed in the forward, saved, and returned by
		// each pass of a retained graph.
		dx := c.FromFloat64s(cpu, []float64{3, 4, 5}, 3)
		y := autograd.Record("Precomputed", tensor.Scale(x.Value, 1), []*autograd.Var{x},
			func(*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{dx} }, dx)
		l := autograd.Sum(y, false)
		require.NoError(t, l.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
		require.NoError(t, l.Backward(), "the second pass reads the saved gradient again")
		require.Equal(t, []float64{6, 8, 10}, x.Grad.Float64s())
		x.ZeroGrad()

		// Returned beside a gradient of the wrong shape: the pass fails,
		// and what was returned is released, the parameter's value not.
		w := leaf64(c, []float64{1, 2}, 2)
		defer w.ZeroGrad()
		bad := autograd.Record("Bad", tensor.Scale(x.Value, 1), []*autograd.Var{x, w},
			func(*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{x.Value, x.Value} })
		require.ErrorIs(t, autograd.Sum(bad, false).Backward(), tensor.ErrShape)
		require.False(t, x.Value.Released(), "the parameter's value after a failed pass")
		require.Nil(t, x.Grad)

		// A loss whose backward returns its own value (1 everywhere).
		var out *tensor.Tensor
		one := autograd.Record("One", c.Full(cpu, tensor.Float64, 1), []*autograd.Var{autograd.Sum(x, false)},
			func(*tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{out} })
		out = one.Value
		require.NoError(t, one.Backward())
		require.Equal(t, 1.0, one.Item(), "the loss's value after Backward")
		require.Equal(t, []float64{1, 1, 1}, x.Grad.Float64s())
	})
	require.Zero(t, c.BytesInUse())
}
