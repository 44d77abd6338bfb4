package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestReduceScalarAxis: Sum and Mean of a scalar over axis 0 or -1 (as
// PyTorch's x.sum(0) of a 0-d tensor) give the scalar and pass its
// gradient through.
func TestReduceScalarAxis(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{3}).Reshape())
		x.SetRequiresGrad(true)
		y := autograd.Mean(autograd.Sum(x, true, 0), false, -1)
		require.Equal(t, 0, y.Value.Rank())
		require.Equal(t, []float32{3}, y.Value.Float32s())
		require.NoError(t, y.Backward())
		require.Equal(t, []float32{1}, x.Grad.Float32s())
		x.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}
