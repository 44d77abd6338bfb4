package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCUDAReleasedGuardRefused: a StepGuard or AdamWArgs used after
// Release on a GPU is an error wrapping ErrReleased, and nothing is
// launched. Their blocks were mapped pinned memory given back: Result and
// SetUnscale read and wrote it on the host (a crash), and the guarded
// kernels wrote it from the device (a fault that ends the context).
func TestCUDAReleasedGuardRefused(t *testing.T) {
	d, q, _ := fakeCUDADevice(t)
	WithScope(func() {
		n := func() *Tensor { return mustNew("t", nil, d, Float32, []int{4, 6}) }
		p, g, m, v := n(), n(), n(), n()
		// Blocks at made-up mapped addresses, as TestCUDALaunchersMatchKernels
		// makes them (no host memory behind them to free).
		guard := &StepGuard{dev: d, w: new(stepGuardWords), cu: &cudaMapped{d: d, what: "StepGuard", dev: 3 << 30}}
		args := &AdamWArgs{dev: d, w: new(adamwArgsWords), cu: &cudaMapped{d: d, what: "AdamWArgs", dev: 4 << 30}}
		require.NoError(t, args.Set(1e-3, 0.9, 0.95, 1e-8, 1))
		liveArgs := &AdamWArgs{dev: d, w: new(adamwArgsWords), cu: &cudaMapped{d: d, what: "AdamWArgs", dev: 5 << 30}}
		require.NoError(t, liveArgs.Set(1e-3, 0.9, 0.95, 1e-8, 1))
		guard.Release()
		args.Release()
		before := len(q.launches)

		_, err := guard.Result()
		require.ErrorIs(t, err, ErrReleased)
		require.ErrorContains(t, err, "StepGuard was released")
		require.ErrorIs(t, guard.SetUnscale(0.5), ErrReleased)
		require.ErrorIs(t, Try(func() { guard.ClipGradNorm([]*Tensor{g}, nil, 1) }), ErrReleased)
		require.ErrorIs(t, Try(func() { guard.Unscale([]*Tensor{g}) }), ErrReleased)
		require.ErrorIs(t, args.Set(1e-3, 0.9, 0.95, 1e-8, 2), ErrReleased)
		ps, gs, ms, vs := []*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}
		err = Try(func() { AdamWStepsGuarded(ps, gs, ms, vs, []float64{0}, args, nil) })
		require.ErrorIs(t, err, ErrReleased)
		require.ErrorContains(t, err, "AdamWArgs was released")
		err = Try(func() { AdamWStepsGuarded(ps, gs, ms, vs, []float64{0}, liveArgs, guard) })
		require.ErrorIs(t, err, ErrReleased)
		require.Equal(t, before, len(q.launches), "nothing launched with a released block")
		guard.Release() // twice: nothing more
	})
}
