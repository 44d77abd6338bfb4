package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// TestGuardedUnscaleFlagsOverflowBelowScaleOne: the captured step's
// unscale (StepGuard.Unscale, train-gpt -cuda-graph) must report the same
// overflow as amp.GradScaler.Unscale, which a captured step replaces.
// Below a loss scale of 1 the factor multiplies, and a finite gradient
// can become infinite as it is unscaled: GradScaler.Unscale checks its
// output then and reports the step bad (the scaler skips it and backs
// off), but the guard checked only its input, so the step came back as
// Skipped (infinite norm) without Overflow: train-gpt's graph path
// recorded a good step for the scaler and stopped the run as "not
// finite" where the eager path skips the step.
// On the GPU the kernel (unscale_guarded_f32) is the one tested.
func TestGuardedUnscaleFlagsOverflowBelowScaleOne(t *testing.T) {
	onDevices(t, testGuardedUnscaleOverflow)
}

func testGuardedUnscaleOverflow(t *testing.T, dev tensor.Device) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		const scale = 0x1p-100
		s := amp.NewGradScaler(true)
		s.Scale = scale
		eager := []*tensor.Tensor{c.FromFloat32s(dev, []float32{1, 1e30})}
		require.False(t, s.Unscale(eager), "the eager unscale reports the overflow")

		g, err := tensor.NewStepGuard(dev)
		require.NoError(t, err)
		defer g.Release()
		require.NoError(t, g.SetUnscale(1/scale))
		guarded := []*tensor.Tensor{c.FromFloat32s(dev, []float32{1, 1e30})}
		g.Unscale(guarded)
		g.ClipGradNorm(guarded, nil, math.Inf(1))
		r, err := g.Result()
		require.NoError(t, err)
		require.True(t, r.Skipped)
		require.True(t, r.Overflow, "the guarded unscale reports the overflow as the eager one does")
		// A finite product and a non-finite input: as before.
		require.NoError(t, g.SetUnscale(1/scale))
		fine := []*tensor.Tensor{c.FromFloat32s(dev, []float32{1, 1e-30})}
		g.Unscale(fine)
		g.ClipGradNorm(fine, nil, math.Inf(1))
		r, err = g.Result()
		require.NoError(t, err)
		require.False(t, r.Overflow, "no overflow: %v", fine[0].Float32s())
		require.InEpsilonSlice(t, []float64{0x1p100, 1e-30 * 0x1p100}, fine[0].Float64s(), 1e-6)
		require.NoError(t, g.SetUnscale(1/scale))
		nan := []*tensor.Tensor{c.FromFloat32s(dev, []float32{float32(math.NaN()), 1})}
		g.Unscale(nan)
		g.ClipGradNorm(nan, nil, math.Inf(1))
		r, err = g.Result()
		require.NoError(t, err)
		require.True(t, r.Overflow, "a NaN gradient")
	})
}

// TestUnscaleGradsTestsEachProduct: UnscaleGrads itself reports a finite
// gradient that overflows as it is multiplied (a factor above 1), in its
// one pass, on every device: GradScaler.Unscale and StepGuard.Unscale's
// CPU path made a second pass (a factor of 1) to find it. A non-finite
// element is still reported, and the products are written either way.
func TestUnscaleGradsTestsEachProduct(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			over := []*tensor.Tensor{c.FromFloat32s(dev, []float32{2}), c.FromFloat32s(dev, []float32{1, 1e30, -3e38})}
			require.False(t, tensor.UnscaleGrads(over, 0x1p100), "1e30 * 2^100 overflows")
			got := over[1].Float64s()
			require.True(t, math.IsInf(got[1], 1) && math.IsInf(got[2], -1), "the products are written: %v", got)
			require.Equal(t, []float64{0x1p101}, over[0].Float64s())

			fine := []*tensor.Tensor{c.FromFloat32s(dev, []float32{1, -1e-30}), nil}
			require.True(t, tensor.UnscaleGrads(fine, 0x1p100))
			require.InEpsilonSlice(t, []float64{0x1p100, -1e-30 * 0x1p100}, fine[0].Float64s(), 1e-6)

			for _, bad := range []float32{float32(math.Inf(1)), float32(math.NaN())} {
				x := []*tensor.Tensor{c.FromFloat32s(dev, []float32{1, bad})}
				require.False(t, tensor.UnscaleGrads(x, 1.0/1024), "%v before", bad)
			}
		})
	})
}
