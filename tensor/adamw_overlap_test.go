package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// overlapCase is a few parameters large enough that an update on a side
// stream takes far longer than queueing the ops that read its results.
type overlapCase struct {
	ps, gs, ms, vs []*tensor.Tensor
	wds            []float64
}

func newOverlapCase(dev tensor.Device, seed uint64, sizes ...int) overlapCase {
	rng := rand.New(rand.NewPCG(seed, 1))
	var c overlapCase
	for i, n := range sizes {
		c.ps = append(c.ps, tensor.RandN(dev, tensor.Float32, rng, 1, n))
		c.gs = append(c.gs, tensor.RandN(dev, tensor.Float32, rng, 0.1, n))
		c.ms = append(c.ms, tensor.Zeros(dev, tensor.Float32, n))
		c.vs = append(c.vs, tensor.Zeros(dev, tensor.Float32, n))
		c.wds = append(c.wds, 0.1*float64(i%2))
	}
	return c
}

func (c overlapCase) clone() overlapCase {
	cl := func(ts []*tensor.Tensor) (out []*tensor.Tensor) {
		for _, t := range ts {
			out = append(out, t.Clone())
		}
		return out
	}
	return overlapCase{cl(c.ps), cl(c.gs), cl(c.ms), cl(c.vs), c.wds}
}

// TestAdamWStepsOverlapped: the overlapped step gives AdamWSteps' bits,
// and ops queued right after it (a clone of every parameter and moment,
// the release of the gradients and of a parameter, whose blocks the next
// allocations reuse, a migration of a moment) see the updated values and
// do not disturb the update, which on a GPU is still running on the side
// stream when they are queued.
func TestAdamWStepsOverlapped(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			sizes := []int{1 << 20, 3 << 20, 70001, 2 << 20, 5, 4 << 20}
			if dev.Kind() == tensor.KindCUDA {
				sizes = []int{16 << 20, 24 << 20, 70001, 16 << 20, 5, 32 << 20}
			}
			a := newOverlapCase(dev, 7, sizes...)
			b := a.clone()
			for step := 1; step <= 3; step++ {
				tensor.AdamWSteps(b.ps, b.gs, b.ms, b.vs, b.wds, 1e-2, 0.9, 0.95, 1e-8, step)
			}
			for step := 1; step <= 2; step++ {
				tensor.AdamWStepsOverlapped(a.ps, a.gs, a.ms, a.vs, a.wds, 1e-2, 0.9, 0.95, 1e-8, step, 1<<20)
			}
			// The last step: its gradients are released at once, as a
			// training step does, and new tensors take their blocks.
			gs := a.clone().gs
			tensor.AdamWStepsOverlapped(a.ps, gs, a.ms, a.vs, a.wds, 1e-2, 0.9, 0.95, 1e-8, 3, 1<<20)
			for _, g := range gs {
				g.Release()
			}
			var fill []*tensor.Tensor
			for _, n := range sizes {
				f := tensor.Full(dev, tensor.Float32, 1e30, n)
				fill = append(fill, f)
			}
			// A moment moves to another tier and back (the placement
			// scheduler's migration) while the update may still write it.
			m := dev.Memory()
			require.NoError(t, m.Migrate(a.ms[1].Allocation(), memory.TierManaged))
			require.NoError(t, m.Migrate(a.ms[1].Allocation(), memory.TierDevice))
			got := a.clone() // queued right behind the update
			for i := range sizes {
				require.Equal(t, b.ps[i].Float32s(), got.ps[i].Float32s(), "parameter %d", i)
				require.Equal(t, b.ms[i].Float32s(), got.ms[i].Float32s(), "first moment %d", i)
				require.Equal(t, b.vs[i].Float32s(), got.vs[i].Float32s(), "second moment %d", i)
				require.Equal(t, float32(1e30), fill[i].Float32s()[sizes[i]-1], "a tensor in a released gradient's block")
			}
			// A parameter released right after an update: its block goes
			// back to the pool only behind the update.
			tensor.AdamWStepsOverlapped(a.ps, b.gs, a.ms, a.vs, a.wds, 1e-2, 0.9, 0.95, 1e-8, 4, 1<<20)
			a.ps[5].Release()
			f := tensor.Full(dev, tensor.Float32, 3, sizes[5])
			require.NoError(t, dev.Synchronize())
			require.Equal(t, float32(3), f.Float32s()[sizes[5]-1])
		})
	})
}

func TestAdamWStepsOverlappedBadGroup(t *testing.T) {
	tensor.WithScope(func() {
		c := newOverlapCase(tensor.CPU(), 1, 4)
		err := tensor.Try(func() {
			tensor.AdamWStepsOverlapped(c.ps, c.gs, c.ms, c.vs, c.wds, 1e-3, 0.9, 0.999, 1e-8, 1, 0)
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "group size 0")
	})
}
