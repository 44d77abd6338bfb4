package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// sqrtOfZero is a loss whose forward is finite at x = 0 (sqrt(0) = 0) and
// whose backward is not: Sqrt's gradient there is +Inf, times the 0 that
// Mul hands it, NaN.
func sqrtOfZero(x *autograd.Var) *autograd.Var {
	c := tensor.CtxOf(x.Value)
	zero := autograd.Const(c.FromFloat32s(x.Value.Device(), []float32{0, 1, 1}, 3))
	return autograd.Sum(autograd.Mul(autograd.Sqrt(x), zero), false)
}

// TestDetectAnomalyNamesTheOp: with anomaly detection on, the first
// backward that returns a NaN or an infinity fails the pass with
// ErrNaN naming the op, the input and this test's frame that
// recorded it; nothing reaches the leaf, and nothing leaks. Without it the
// pass completes with the infinity in the gradient, as in PyTorch.
func TestDetectAnomalyNamesTheOp(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	x := autograd.Param(tensor.FromFloat32s(cpu, []float32{0, 1, 4}, 3), "x")
	defer x.Value.Release()

	c.WithScope(func() {
		y := autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{1, 1, 1}, 3)))
		require.NoError(t, sqrtOfZero(y).Backward())
		require.True(t, tensor.HasNaN(x.Grad), "no detection: the NaN reaches the leaf")
		x.ZeroGrad()
	})

	require.False(t, autograd.AnomalyDetectionIn(c))
	autograd.DetectAnomalyIn(c, func() {
		require.True(t, autograd.AnomalyDetectionIn(c))
		require.False(t, autograd.AnomalyDetectionIn(tensor.NewCtx()), "other contexts are not affected")
		c.WithScope(func() {
			y := autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{1, 1, 1}, 3)))
			err := sqrtOfZero(y).Backward()
			require.ErrorIs(t, err, autograd.ErrNaN)
			var oe *tensor.OpError
			require.ErrorAs(t, err, &oe)
			require.Contains(t, err.Error(), "backward of Sqrt returned a NaN in the gradient of input 0 (Mul), recorded at:")
			require.Contains(t, err.Error(), "autograd_test.sqrtOfZero (")
			require.Contains(t, err.Error(), "anomaly_test.go:")
			require.Nil(t, x.Grad)
		})
		require.Zero(t, c.BytesInUse())
	})
	require.False(t, autograd.AnomalyDetectionIn(c))

	// A graph recorded outside the mode and differentiated inside it: the
	// check runs, and says the recording site is unknown.
	c.WithScope(func() {
		y := autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{1, 1, 1}, 3)))
		loss := sqrtOfZero(y)
		autograd.DetectAnomalyIn(c, func() {
			err := loss.Backward()
			require.ErrorIs(t, err, autograd.ErrNaN)
			require.Contains(t, err.Error(), "recorded without anomaly detection on")
		})
	})

	// Finite gradients pass, with the same values as without the mode.
	c.WithScope(func() {
		var with []float32
		autograd.DetectAnomalyIn(c, func() {
			y := autograd.Tanh(autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{2, 2, 2}, 3))))
			require.NoError(t, autograd.Sum(y, false).Backward())
			with = x.Grad.Float32s()
			x.ZeroGrad()
		})
		y := autograd.Tanh(autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{2, 2, 2}, 3))))
		require.NoError(t, autograd.Sum(y, false).Backward())
		require.Equal(t, with, x.Grad.Float32s())
		x.ZeroGrad()
	})
	// An infinity passes, as in PyTorch (an fp16 overflow is the scaler's).
	autograd.DetectAnomalyIn(c, func() {
		c.WithScope(func() {
			y := autograd.Mul(x, autograd.Const(c.FromFloat32s(cpu, []float32{1, 1, 1}, 3)))
			require.NoError(t, autograd.Sum(autograd.Sqrt(y), false).Backward())
			require.False(t, tensor.AllFinite(x.Grad))
			x.ZeroGrad()
		})
	})
	require.ErrorIs(t, tensor.Try(func() { autograd.DetectAnomalyIn(c, nil) }), tensor.ErrArgument)
}
