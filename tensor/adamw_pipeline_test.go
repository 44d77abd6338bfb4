package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestAdamWStepsPipelined: the pipelined step gives AdamWSteps' bits over
// three steps, calls done once a group, in order, with the gradients of
// later groups still live (the caller releases each group's there), and
// on the CPU, where it runs as it is called, with the groups before
// updated and the ones after not yet. On a GPU the launches are capped at
// a few blocks, so a group takes several, and tensors made right after the
// step take the released gradients' blocks without disturbing the update.
func TestAdamWStepsPipelined(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			sizes := []int{1 << 20, 3 << 20, 70001, 2 << 20, 5, 4 << 20}
			if dev.Kind() == tensor.KindCUDA {
				sizes = []int{16 << 20, 24 << 20, 70001, 16 << 20, 5, 32 << 20}
			}
			ends := []int{2, 3, 6}
			a := newOverlapCase(dev, 11, sizes...)
			b := a.clone()
			for step := 1; step <= 3; step++ {
				tensor.AdamWSteps(b.ps, b.gs, b.ms, b.vs, b.wds, 1e-2, 0.9, 0.95, 1e-8, step)
				var before []*tensor.Tensor // the parameters before this step, on the CPU
				if dev.Kind() == tensor.KindCPU {
					before = cloneAll(a.ps)
				}
				gs := cloneAll(a.gs)
				var calls [][2]int
				tensor.AdamWStepsPipelined(a.ps, gs, a.ms, a.vs, a.wds, 1e-2, 0.9, 0.95, 1e-8, step, ends, 3, func(lo, hi int) {
					calls = append(calls, [2]int{lo, hi})
					for i, g := range gs {
						require.Equal(t, i < lo, g.Released(), "step %d, group [%d, %d): gradient %d", step, lo, hi, i)
					}
					for i := lo; i < hi; i++ {
						gs[i].Release()
					}
					if before == nil {
						return
					}
					for i := range sizes {
						if i < hi {
							require.Equal(t, b.ps[i].Float32s(), a.ps[i].Float32s(), "step %d, group [%d, %d): parameter %d updated", step, lo, hi, i)
						} else {
							require.Equal(t, before[i].Float32s(), a.ps[i].Float32s(), "step %d, group [%d, %d): parameter %d not yet", step, lo, hi, i)
						}
					}
				})
				require.Equal(t, [][2]int{{0, 2}, {2, 3}, {3, 6}}, calls)
				var fill []*tensor.Tensor // queued behind the update, in the gradients' blocks
				for _, n := range sizes {
					fill = append(fill, tensor.Full(dev, tensor.Float32, 1e30, n))
				}
				for i := range sizes {
					require.Equal(t, b.ps[i].Float32s(), a.ps[i].Float32s(), "step %d: parameter %d", step, i)
					require.Equal(t, b.ms[i].Float32s(), a.ms[i].Float32s(), "step %d: first moment %d", step, i)
					require.Equal(t, b.vs[i].Float32s(), a.vs[i].Float32s(), "step %d: second moment %d", step, i)
					require.Equal(t, float32(1e30), fill[i].Float32s()[sizes[i]-1], "a tensor in a released gradient's block")
				}
				for _, f := range fill {
					f.Release()
				}
			}
			require.NoError(t, tensor.WaitOverlapped(dev))
		})
	})
}

// TestAdamWStepsPipelinedBadArguments: bad group ends and mismatched
// lists are refused before any parameter changes.
func TestAdamWStepsPipelinedBadArguments(t *testing.T) {
	tensor.WithScope(func() {
		c := newOverlapCase(tensor.CPU(), 1, 4, 5, 6)
		p0 := c.ps[0].Float32s()
		for _, tc := range []struct {
			ends []int
			msg  string
		}{
			{nil, "the last group must end at 3"},
			{[]int{1, 2}, "the last group must end at 3"},
			{[]int{2, 2, 3}, "group ends must increase"},
			{[]int{0, 3}, "group ends must increase"},
			{[]int{1, 4}, "group ends must increase"},
		} {
			err := tensor.Try(func() {
				tensor.AdamWStepsPipelined(c.ps, c.gs, c.ms, c.vs, c.wds, 1e-3, 0.9, 0.999, 1e-8, 1, tc.ends, 0, nil)
			})
			require.ErrorIs(t, err, tensor.ErrArgument, "ends %v", tc.ends)
			require.ErrorContains(t, err, tc.msg, "ends %v", tc.ends)
		}
		err := tensor.Try(func() {
			tensor.AdamWStepsPipelined(c.ps, c.gs[:2], c.ms, c.vs, c.wds, 1e-3, 0.9, 0.999, 1e-8, 1, []int{3}, 0, nil)
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		bad := tensor.Zeros(tensor.CPU(), tensor.Float32, 7)
		err = tensor.Try(func() {
			tensor.AdamWStepsPipelined(c.ps, []*tensor.Tensor{c.gs[0], c.gs[1], bad}, c.ms, c.vs, c.wds, 1e-3, 0.9, 0.999, 1e-8, 1, []int{1, 3}, 0, nil)
		})
		require.ErrorIs(t, err, tensor.ErrShape)
		require.Equal(t, p0, c.ps[0].Float32s(), "a refused step changes nothing")
	})
}

func cloneAll(ts []*tensor.Tensor) (out []*tensor.Tensor) {
	for _, t := range ts {
		out = append(out, t.Clone())
	}
	return out
}
