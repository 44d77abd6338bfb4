package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// failingOp is an identity whose backward fails as an op out of memory
// would: a panic with an *tensor.OpError.
func failingOp(x *autograd.Var) *autograd.Var {
	return autograd.Record("Fail", x.Value.Alias(), []*autograd.Var{x}, func(*tensor.Tensor) []*tensor.Tensor {
		panic(&tensor.OpError{Op: "Fail", Msg: "injected", Err: tensor.ErrArgument})
	})
}

// A Backward that fails midway returns the error and leaves no gradient
// pending on the vars it did not reach: a later pass through them (h,
// whose graph the failed pass never consumed) starts from none. It used
// to find the failed pass's released gradient there (tensor.ErrReleased).
func TestFailedBackwardLeavesNothingPending(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := leaf64(c, []float64{1, 2, 3}, 3)
		defer x.ZeroGrad()
		h := autograd.Scale(x, 2)
		// h's other consumer steps first and hands h a pending gradient.
		l := autograd.Add(autograd.Sum(failingOp(h), false), autograd.Sum(autograd.Scale(h, 3), false))
		require.ErrorIs(t, l.Backward(), tensor.ErrArgument)
		x.ZeroGrad()

		require.NoError(t, autograd.Sum(h, false).Backward())
		require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())
	})
	require.Zero(t, c.BytesInUse())
}

// A var computed by an op stays a non-leaf after Backward consumed its
// node, as in PyTorch: IsLeaf used to turn true, and SetRequiresGrad,
// SetGradHook and SetGradDType, which refuse a non-leaf, accepted it.
func TestConsumedVarIsNoLeaf(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := leaf64(c, []float64{1, 2, 3}, 3)
		defer x.ZeroGrad()
		h := autograd.Scale(x, 2).Retain()
		defer h.ZeroGrad()
		require.NoError(t, autograd.Sum(h, false).Backward())
		require.False(t, h.IsLeaf())
		require.Panics(t, func() { h.SetRequiresGrad(false) })
		require.Panics(t, func() { h.SetGradHook(func(*autograd.Var) {}) })
		require.Error(t, h.SetGradDType(tensor.Float64))
		require.True(t, x.IsLeaf())
	})
	require.Zero(t, c.BytesInUse())
}
