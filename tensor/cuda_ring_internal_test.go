package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestGPUPipelineRing: with the copy ring on and the moments in host
// memory (the offload tier, and the staging tier for one), the pipelined
// update gives AdamWSteps' bits on device-resident copies over three
// steps: parameters of several ring chunks (one ending mid-chunk), small
// ones between them that stay off the ring (moments on the device), a
// bf16 gradient, and more chunks than slots.
func TestGPUPipelineRing(t *testing.T) {
	dev := gpuForTest(t)
	defer func(on bool) { pipelineRing = on }(pipelineRing)
	pipelineRing = true
	WithScope(func() {
		sizes := []int{3*ringChunk + 4099, 70001, 2 * ringChunk, 5, ringChunk + 1, 4*ringChunk - 7}
		tiers := []memory.Tier{memory.TierOffload, memory.TierDevice, memory.TierOffload, memory.TierDevice, memory.TierStaging, memory.TierOffload}
		rng := rand.New(rand.NewPCG(5, 6))
		var ps, ms, vs, rps, rms, rvs []*Tensor
		wd := make([]float64, len(sizes))
		for i, n := range sizes {
			ps = append(ps, RandN(dev, Float32, rng, 1, n))
			ms = append(ms, Zeros(dev, Float32, n))
			vs = append(vs, Zeros(dev, Float32, n))
			rps, rms, rvs = append(rps, ps[i].Clone()), append(rms, ms[i].Clone()), append(rvs, vs[i].Clone())
			wd[i] = 0.1 * float64(i%2)
			if tiers[i] != memory.TierDevice {
				require.NoError(t, MoveTo(tiers[i], ms[i], vs[i]))
			}
		}
		ends := []int{1, 3, 4, 6}
		// Chunks a step through the ring: the offload tier's moments when
		// it is pinned (the default), the staging tier's always.
		want := 2
		if dev.mem.HostPinned(memory.TierOffload) {
			want += 4 + 2 + 4
		}
		for step := 1; step <= 3; step++ {
			before := dev.ring.next
			var gs, rgs []*Tensor
			for i, n := range sizes {
				g := RandN(dev, Float32, rng, 1, n)
				if i == 2 {
					g = g.To(BFloat16)
				}
				gs, rgs = append(gs, g), append(rgs, g.Clone())
			}
			AdamWSteps(rps, rgs, rms, rvs, wd, 1e-2, 0.9, 0.95, 1e-8, step)
			AdamWStepsPipelined(ps, gs, ms, vs, wd, 1e-2, 0.9, 0.95, 1e-8, step, ends, 0, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					gs[i].Release()
				}
			})
			require.NoError(t, WaitOverlapped(dev))
			require.Equal(t, want, dev.ring.next-before, "step %d: chunks through the ring", step)
			for i := range sizes {
				require.Equal(t, rps[i].Float32s(), ps[i].Float32s(), "step %d: parameter %d", step, i)
				require.Equal(t, rms[i].Float32s(), ms[i].Float32s(), "step %d: first moment %d (%v)", step, i, tiers[i])
				require.Equal(t, rvs[i].Float32s(), vs[i].Float32s(), "step %d: second moment %d (%v)", step, i, tiers[i])
			}
		}
		require.True(t, dev.ring.ready.Load(), "the ring was made")
	})
}

// TestGPUPipelineRingSteps: a parameter of fewer chunks than the ring has
// slots, updated step after step with nothing read in between, so that
// only its moments' fences (not the slots' reuse) order a step's copy in
// after the step before's write-back: the same bits as AdamWSteps.
func TestGPUPipelineRingSteps(t *testing.T) {
	dev := gpuForTest(t)
	defer func(on bool) { pipelineRing = on }(pipelineRing)
	pipelineRing = true
	WithScope(func() {
		n := 2*ringChunk + ringChunk/2 // three chunks
		rng := rand.New(rand.NewPCG(7, 8))
		p := RandN(dev, Float32, rng, 1, n)
		m, v := Zeros(dev, Float32, n), Zeros(dev, Float32, n)
		rp, rm, rv := p.Clone(), m.Clone(), v.Clone()
		require.NoError(t, MoveTo(memory.TierStaging, m, v))
		for step := 1; step <= 8; step++ {
			g := RandN(dev, Float32, rng, 1, n)
			AdamWSteps([]*Tensor{rp}, []*Tensor{g.Clone()}, []*Tensor{rm}, []*Tensor{rv}, []float64{0.1}, 1e-2, 0.9, 0.95, 1e-8, step)
			AdamWStepsPipelined([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, []float64{0.1}, 1e-2, 0.9, 0.95, 1e-8, step, []int{1}, 0, nil)
		}
		require.NoError(t, WaitOverlapped(dev))
		require.Equal(t, rp.Float32s(), p.Float32s(), "parameter")
		require.Equal(t, rm.Float32s(), m.Float32s(), "first moment")
		require.Equal(t, rv.Float32s(), v.Float32s(), "second moment")
	})
}
