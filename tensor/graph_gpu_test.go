package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// graphStep is a small training-like step over c: the gradients made from
// the parameters and the input by a product, a sum and temporaries (freed
// inside the step, so the private pool reuses their blocks), then the
// guarded clip and update.
func graphStep(c overlapCase, x *tensor.Tensor, guard *tensor.StepGuard, args *tensor.AdamWArgs) {
	tensor.WithScope(func() {
		for i, g := range c.gs {
			tmp := tensor.Add(tensor.Mul(c.ps[i], x.Narrow(0, 0, c.ps[i].Numel())), tensor.Affine(c.ps[i], 0.5, 0))
			g.CopyFrom(tmp)
		}
		loss := tensor.Affine(tensor.Sum(c.gs[0], false), 1e-3, 0)
		guard.ClipGradNorm(c.gs, loss, 2)
		tensor.AdamWStepsGuarded(c.ps, c.gs, c.ms, c.vs, c.wds, args, guard)
	})
}

// TestGPUCaptureGraphReplaysStep: a captured guarded step, replayed with a
// new input and new constants each time, gives the eager step's bits and
// results; it launches no kernel from the host; a graph's private pool
// survives EmptyCache while the graph lives.
func TestGPUCaptureGraphReplaysStep(t *testing.T) {
	dev := cudaOrSkip(t)
	tensor.WithScope(func() {
		eager := newOverlapCase(dev, 11, 5000, 300000, 7)
		gr := eager.clone()
		x := tensor.Zeros(dev, tensor.Float32, 300000)
		rng := rand.New(rand.NewPCG(5, 5))
		mk := func() (*tensor.StepGuard, *tensor.AdamWArgs) {
			g, err := tensor.NewStepGuard(dev)
			require.NoError(t, err)
			a, err := tensor.NewAdamWArgs(dev)
			require.NoError(t, err)
			return g, a
		}
		ge, ae := mk()
		gg, ag := mk()
		defer func() { ge.Release(); ae.Release(); gg.Release(); ag.Release() }()
		g, err := tensor.CaptureGraph(dev, func() { graphStep(gr, x, gg, ag) })
		require.NoError(t, err)
		defer func() { require.NoError(t, g.Release()) }()
		assert.Greater(t, g.Kernels(), 8)
		require.NoError(t, dev.Memory().EmptyCache()) // the private pool stays
		for step := 1; step <= 4; step++ {
			xv := tensor.RandN(dev, tensor.Float32, rng, float64(step), 300000)
			x.CopyFrom(xv)
			xv.Release()
			lr := 1e-3 / float64(step)
			require.NoError(t, ae.Set(lr, 0.9, 0.95, 1e-8, step))
			graphStep(eager, x, ge, ae)
			want, err := ge.Result()
			require.NoError(t, err)
			require.NoError(t, ag.Set(lr, 0.9, 0.95, 1e-8, step))
			before := tensor.CUDALaunches()
			require.NoError(t, g.Launch())
			assert.Equal(t, before, tensor.CUDALaunches(), "a replay launches nothing from the host")
			got, err := gg.Result()
			require.NoError(t, err)
			assert.Equal(t, want, got, "step %d", step)
			requireSameBits(t, eager.ps, gr.ps, "parameter")
			requireSameBits(t, eager.ms, gr.ms, "exp_avg")
			requireSameBits(t, eager.vs, gr.vs, "exp_avg_sq")
		}
	})
}

// TestGPUCaptureGraphRefusals: what a capture cannot hold fails with an
// error that says so, the capture is discarded and the device works on.
func TestGPUCaptureGraphRefusals(t *testing.T) {
	dev := cudaOrSkip(t)
	workspace := func() int64 { return dev.Memory().Stats().Roles[memory.RoleWorkspace].Allocated.Current }
	ws := workspace()
	tensor.WithScope(func() {
		a := tensor.Full(dev, tensor.Float32, 3, 16)
		c := newOverlapCase(dev, 2, 64, 300)
		for name, fn := range map[string]func(){
			"adamw host constants": func() {
				tensor.AdamWSteps(c.ps, c.gs, c.ms, c.vs, c.wds, 1e-3, 0.9, 0.95, 1e-8, 1)
			},
			"overlapped adamw": func() {
				tensor.AdamWStepsOverlapped(c.ps, c.gs, c.ms, c.vs, c.wds, 1e-3, 0.9, 0.95, 1e-8, 1, 1<<10)
			},
			"item":     func() { _ = tensor.Sum(a, false).Item() },
			"upload":   func() { _ = tensor.FromFloat32s(dev, []float32{1}, 1) },
			"dropout":  func() { _ = tensor.Dropout(a, 0.5, 1, 0) },
			"sync":     func() { require.Error(t, dev.Synchronize()) },
			"readback": func() { _ = a.Float32s() },
		} {
			g, err := tensor.CaptureGraph(dev, fn)
			if name == "sync" {
				require.NoError(t, err, "a refused Synchronize returns its error to the caller")
				require.NoError(t, g.Release())
				continue
			}
			require.Error(t, err, name)
			assert.Contains(t, err.Error(), "captures a CUDA graph", name)
			assert.False(t, tensor.Capturing(dev))
			assert.Equal(t, float64(48), tensor.Sum(a, false).Item(), "the device works after a refused capture (%s)", name)
		}
		// A tensor made before the capture and released in it is freed
		// with the graph, not at once.
		pre := tensor.Zeros(dev, tensor.Float32, 1<<20)
		inUse := dev.Memory().InUse()
		g, err := tensor.CaptureGraph(dev, func() { pre.Release() })
		require.NoError(t, err)
		assert.Equal(t, inUse, dev.Memory().InUse(), "freed with the graph")
		require.NoError(t, g.Release())
		assert.Equal(t, inUse-4<<20, dev.Memory().InUse())
		var inner error
		g, err = tensor.CaptureGraph(dev, func() { _, inner = tensor.CaptureGraph(dev, func() {}) })
		require.NoError(t, err)
		require.ErrorContains(t, inner, "already capturing")
		require.NoError(t, g.Release())
	})
	assert.Equal(t, ws, workspace(), "no workspace left behind")
}

// TestGPUCaptureGraphGivesBackCache: the eager steps' cached memory is
// given back before a capture, so the graph's private pool does not stack
// on it: a captured 256 MiB temporary after an eager one of the same size
// raises the device's peak reserved bytes by far less than 256 MiB.
func TestGPUCaptureGraphGivesBackCache(t *testing.T) {
	dev := cudaOrSkip(t)
	const n = 64 << 20 // float32s: 256 MiB
	tensor.Zeros(dev, tensor.Float32, n).Release()
	require.NoError(t, dev.Synchronize())
	mem := dev.Memory()
	cached := mem.Stats().Tiers[memory.TierDevice].Reserved.Current
	require.GreaterOrEqual(t, cached, int64(n*4), "the eager temporary's block is cached")
	mem.ResetPeaks()
	g, err := tensor.CaptureGraph(dev, func() {
		tensor.WithScope(func() { tensor.Zeros(dev, tensor.Float32, n) })
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Release()) }()
	require.NoError(t, g.Launch())
	require.NoError(t, dev.Synchronize())
	peak := mem.Stats().Tiers[memory.TierDevice].Reserved.Peak
	assert.Less(t, peak, cached+int64(n*4)/2,
		"peak reserved %s after the capture, %s cached before it: the private pool stacked on the eager cache",
		memory.FormatBytes(peak), memory.FormatBytes(cached))
}

// TestGPUGraphReplayCountsWrites: a graph whose captured work writes a
// tensor in place counts a write on it at every replay, as running the
// ops would (tensor.Tensor.Version), so autograd sees a replayed
// optimizer step between a forward pass and its backward.
func TestGPUGraphReplayCountsWrites(t *testing.T) {
	dev := cudaOrSkip(t)
	tensor.WithScope(func() {
		a := tensor.Full(dev, tensor.Float32, 1, 16)
		b := tensor.Full(dev, tensor.Float32, 2, 16)
		g, err := tensor.CaptureGraph(dev, func() { a.AddInPlace(b) })
		require.NoError(t, err)
		defer func() { require.NoError(t, g.Release()) }()
		v := a.Version()
		require.Zero(t, b.Version())
		for i := 1; i <= 3; i++ {
			require.NoError(t, g.Launch())
			require.Equal(t, v+uint64(i), a.Version())
		}
		require.Zero(t, b.Version(), "what the graph only reads is not counted")
	})
}
