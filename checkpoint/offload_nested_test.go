package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestOffloadNestedRegionsInBackward: regions nested in offloaded ones,
// sharing their Offload, are made again by each outer region's
// recomputation. Registered then as regions of a forward pass, they moved
// out the region Keep places before them: the outer region being
// recomputed (Keep 1) or the one Ahead had just brought back (Keep 2), so
// the recomputation and the backward read them over the bus and every
// prefetch was undone. A recomputation's regions move nothing, and Regions
// still counts the forward pass's.
func TestOffloadNestedRegionsInBackward(t *testing.T) {
	n := newNet(10)
	defer n.release()
	for _, keep := range []int{1, 2} {
		off := &checkpoint.Offload{Keep: keep, Ahead: 1}
		o := checkpoint.Options{Offload: off}
		c := tensor.NewCtx()
		var ins []*autograd.Var
		calls := map[int]int{}
		var during [][]memory.Tier // the tiers of ins[k-1] and ins[k] as outer region k's recomputation ends
		c.WithScope(func() {
			x := autograd.Add(autograd.Const(c.Zeros(tensor.CPU(), tensor.Float32, 2, 5, width)),
				autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5, width)))
			y := x
			for k := range 4 {
				ins = append(ins, y)
				y = o.Apply(func(in ...*autograd.Var) *autograd.Var {
					h := o.Apply(func(in ...*autograd.Var) *autograd.Var { return n.block(in[0]) }, in[0])
					h = n.block(h)
					if calls[k]++; calls[k] == 2 && k > 0 {
						during = append(during, []memory.Tier{ins[k-1].Value.Allocation().Tier(), ins[k].Value.Allocation().Tier()})
					}
					return h
				}, y)
			}
			regions, _ := off.Regions()
			assert.Equal(t, 4, regions, "keep %d: the forward pass's outer regions", keep)
			require.NoError(t, autograd.Sum(y, false).Backward())
			regions, _ = off.Regions()
			assert.Equal(t, 4, regions, "keep %d: after backward", keep)
		})
		require.Len(t, during, 3)
		for i, ts := range during {
			assert.Equal(t, []memory.Tier{memory.TierDevice, memory.TierDevice}, ts,
				"keep %d: outer region %d's input and the one before it, as its recomputation ends", keep, i+1)
		}
		for _, p := range n.params() {
			p.ZeroGrad()
		}
		require.Zero(t, c.BytesInUse())
	}
}
