package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// hostClipAdamW is the host-driven step the guarded one must equal:
// nn.ClipGradNorm's arithmetic, then AdamWSteps.
func hostClipAdamW(c overlapCase, maxNorm, lr float64, step int) (norm float64) {
	norm = math.Sqrt(tensor.SumSquaresAll(c.gs))
	if f := maxNorm / (norm + 1e-6); f < 1 {
		tensor.ScaleAll(c.gs, f)
	}
	tensor.AdamWSteps(c.ps, c.gs, c.ms, c.vs, c.wds, lr, 0.9, 0.95, 1e-8, step)
	return norm
}

func requireSameBits(t *testing.T, want, got []*tensor.Tensor, what string) {
	t.Helper()
	for i := range want {
		w, g := want[i].Float32s(), got[i].Float32s()
		for j := range w {
			if math.Float32bits(w[j]) != math.Float32bits(g[j]) {
				t.Fatalf("%s %d element %d: %v (host-driven) != %v (guarded)", what, i, j, w[j], g[j])
			}
		}
	}
}

// TestGuardedStepMatchesHost: StepGuard.ClipGradNorm followed by
// AdamWStepsGuarded gives the bits of the host-driven clip and update,
// with the gradients clipped and not, over several steps with a changing
// learning rate; and the loss and norm it reports are the host's.
func TestGuardedStepMatchesHost(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { guardedMatchesHost(t, dev) })
	})
}

func guardedMatchesHost(t *testing.T, dev tensor.Device) {
	for _, maxNorm := range []float64{math.Inf(1), 1e3, 0.5} {
		host := newOverlapCase(dev, 7, 3000, 70000, 5)
		gd := host.clone()
		guard, err := tensor.NewStepGuard(dev)
		require.NoError(t, err)
		defer guard.Release()
		args, err := tensor.NewAdamWArgs(dev)
		require.NoError(t, err)
		defer args.Release()
		loss := tensor.Full(dev, tensor.Float32, 2.75)
		for step := 1; step <= 3; step++ {
			lr := 1e-3 * float64(step)
			norm := hostClipAdamW(host, maxNorm, lr, step)
			require.NoError(t, args.Set(lr, 0.9, 0.95, 1e-8, step))
			guard.ClipGradNorm(gd.gs, loss, maxNorm)
			tensor.AdamWStepsGuarded(gd.ps, gd.gs, gd.ms, gd.vs, gd.wds, args, guard)
			r, err := guard.Result()
			require.NoError(t, err)
			assert.Equal(t, norm, r.Norm, "norm, max %v step %d", maxNorm, step)
			assert.Equal(t, 2.75, r.Loss)
			assert.False(t, r.Skipped)
			if maxNorm == 0.5 && step == 1 { // later steps see the clipped gradients
				assert.Less(t, r.Clip, 1.0, "step %d norm %v", step, r.Norm)
			} else if maxNorm != 0.5 {
				assert.Equal(t, 1.0, r.Clip)
			}
			requireSameBits(t, host.gs, gd.gs, "gradient")
			requireSameBits(t, host.ps, gd.ps, "parameter")
			requireSameBits(t, host.ms, gd.ms, "exp_avg")
			requireSameBits(t, host.vs, gd.vs, "exp_avg_sq")
		}
	}
}

// TestGuardedStepSkipsNonFinite: a NaN gradient or an infinite loss sets
// the skip flag and the guarded update leaves parameters and moments as
// they were.
func TestGuardedStepSkipsNonFinite(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() { guardedSkips(t, dev) })
	})
}

func guardedSkips(t *testing.T, dev tensor.Device) {
	for _, bad := range []string{"gradient", "loss"} {
		c := newOverlapCase(dev, 3, 100, 200)
		before := c.clone()
		lossV := 1.0
		if bad == "gradient" {
			g := c.gs[1].Float32s()
			g[17] = float32(math.NaN())
			c.gs[1] = tensor.FromFloat32s(dev, g, 200)
		} else {
			lossV = math.Inf(1)
		}
		guard, err := tensor.NewStepGuard(dev)
		require.NoError(t, err)
		args, err := tensor.NewAdamWArgs(dev)
		require.NoError(t, err)
		require.NoError(t, args.Set(1e-3, 0.9, 0.95, 1e-8, 1))
		guard.ClipGradNorm(c.gs, tensor.Full(dev, tensor.Float32, lossV), 1)
		tensor.AdamWStepsGuarded(c.ps, c.gs, c.ms, c.vs, c.wds, args, guard)
		r, err := guard.Result()
		require.NoError(t, err)
		assert.True(t, r.Skipped, bad)
		requireSameBits(t, before.ps, c.ps, "parameter")
		requireSameBits(t, before.ms, c.ms, "exp_avg")
		guard.Release()
		args.Release()
	}
}

// TestGuardedStepBadInput: clear errors for what a guarded step refuses.
func TestGuardedStepBadInput(t *testing.T) {
	tensor.WithScope(func() { guardedBadInput(t) })
}

func guardedBadInput(t *testing.T) {
	dev := tensor.CPU()
	guard, err := tensor.NewStepGuard(dev)
	require.NoError(t, err)
	g64 := tensor.Zeros(dev, tensor.Float64, 4)
	err = tensor.Try(func() { guard.ClipGradNorm([]*tensor.Tensor{g64}, nil, 1) })
	require.ErrorIs(t, err, tensor.ErrDType)
	assert.Contains(t, err.Error(), "float32")
	err = tensor.Try(func() { guard.ClipGradNorm(nil, nil, 0) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	err = tensor.Try(func() { guard.ClipGradNorm(nil, tensor.Zeros(dev, tensor.Float32, 2), 1) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.Contains(t, err.Error(), "scalar")
	args, err := tensor.NewAdamWArgs(dev)
	require.NoError(t, err)
	require.ErrorIs(t, args.Set(1e-3, 0.9, 0.95, 1e-8, 0), tensor.ErrArgument)
	c := newOverlapCase(dev, 1, 8)
	err = tensor.Try(func() { tensor.AdamWStepsGuarded(c.ps, c.gs, c.ms, c.vs, c.wds, args, guard) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.Contains(t, err.Error(), "Set")
}

// TestCaptureGraphNeedsCUDA: the CPU has no graphs; the error says so.
func TestCaptureGraphNeedsCUDA(t *testing.T) {
	_, err := tensor.CaptureGraph(tensor.CPU(), func() {})
	require.ErrorIs(t, err, tensor.ErrDevice)
	assert.Contains(t, err.Error(), "CUDA graphs need a CUDA device")
	assert.False(t, tensor.Capturing(tensor.CPU()))
}

// TestGuardedUnscale: StepGuard.Unscale multiplies by the factor
// SetUnscale wrote, as UnscaleGrads does, and an infinite gradient raises
// Overflow and skips the guarded update.
func TestGuardedUnscale(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			host := newOverlapCase(dev, 9, 500, 70000)
			gd := host.clone()
			guard, err := tensor.NewStepGuard(dev)
			require.NoError(t, err)
			defer guard.Release()
			require.True(t, tensor.UnscaleGrads(host.gs, 1.0/1024))
			require.NoError(t, guard.SetUnscale(1.0/1024))
			guard.Unscale(gd.gs)
			guard.ClipGradNorm(gd.gs, nil, math.Inf(1))
			r, err := guard.Result()
			require.NoError(t, err)
			assert.False(t, r.Overflow)
			assert.False(t, r.Skipped)
			requireSameBits(t, host.gs, gd.gs, "gradient")

			g := gd.gs[0].Float32s()
			g[3] = float32(math.Inf(1))
			gd.gs[0] = tensor.FromFloat32s(dev, g, 500)
			before := gd.clone()
			require.NoError(t, guard.SetUnscale(0.5))
			args, err := tensor.NewAdamWArgs(dev)
			require.NoError(t, err)
			defer args.Release()
			require.NoError(t, args.Set(1e-3, 0.9, 0.95, 1e-8, 1))
			guard.Unscale(gd.gs)
			guard.ClipGradNorm(gd.gs, nil, 1)
			tensor.AdamWStepsGuarded(gd.ps, gd.gs, gd.ms, gd.vs, gd.wds, args, guard)
			r, err = guard.Result()
			require.NoError(t, err)
			assert.True(t, r.Overflow)
			assert.True(t, r.Skipped)
			requireSameBits(t, before.ps, gd.ps, "parameter")
			require.NoError(t, guard.SetUnscale(0.5))
			r, err = guard.Result()
			require.NoError(t, err)
			assert.False(t, r.Overflow, "SetUnscale clears the flag")
		})
	})
}
