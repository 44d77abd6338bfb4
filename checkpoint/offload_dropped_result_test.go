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

// TestOffloadDroppedResultComesBack: regions whose results feed an Add
// only (h + f(h), a residual), which model code may Drop since no
// backward reads them, with Keep -1 so that each region moves its input
// out as its forward pass ends. Offload took a released result for the
// end of the pass and forgot the region (the first, as the second
// registered) or skipped it (the second, in its backward) without
// bringing back what it had moved out: both recomputations read their
// inputs in the staging tier, and what outlived the step stayed there.
// Each region now has its input on the device when it is recomputed, and
// the results are the plain run's bit for bit.
func TestOffloadDroppedResultComesBack(t *testing.T) {
	n := newNet(12)
	defer n.release()
	residuals := func(o checkpoint.Options, during *[]memory.Tier) func(x *autograd.Var) *autograd.Var {
		return func(x *autograd.Var) *autograd.Var {
			h := x
			for range 2 {
				in, calls := h, 0
				y := o.Apply(func(v ...*autograd.Var) *autograd.Var {
					if calls++; calls == 2 { // the recomputation, in backward
						*during = append(*during, in.Value.Allocation().Tier())
					}
					return n.block(v[0])
				}, in)
				h = autograd.Add(in, y)
				y.Drop()
			}
			return h
		}
	}
	var plainTiers, tiers []memory.Tier
	c := tensor.NewCtx()
	autograd.SetRandomState(c, 100)
	want := run(t, c, n, true, residuals(checkpoint.Options{Policy: checkpoint.SaveMatMuls}, &plainTiers))
	off := &checkpoint.Offload{Keep: -1}
	c = tensor.NewCtx()
	autograd.SetRandomState(c, 100)
	got := run(t, c, n, true, residuals(checkpoint.Options{Policy: checkpoint.SaveMatMuls, Offload: off}, &tiers))
	sameBits(t, want, got, "offloaded, results dropped")
	require.Len(t, plainTiers, 2)
	assert.Equal(t, []memory.Tier{memory.TierDevice, memory.TierDevice}, tiers,
		"each region's input (the second's first: backward runs in reverse) as it is recomputed")
	require.Zero(t, c.BytesInUse())
}

// TestOffloadForgottenRegionBringsBack: a forward pass with recording on
// and no backward (an evaluation) over an input that outlives it, with
// Keep -1 so that the region moves the input out as its forward pass
// ends. When the context's next pass registers a region and finds the
// record over (its result released with the pass's scope), the input
// comes back to the device: it stayed in the staging tier for good, where
// every later op read it over the bus. A region of another context
// registering in between (which forgets contexts whose passes are over)
// leaves the record to its own context, the only one that may move the
// input.
func TestOffloadForgottenRegionBringsBack(t *testing.T) {
	n := newNet(13)
	defer n.release()
	block := func(in ...*autograd.Var) *autograd.Var { return n.block(in[0]) }
	pass := func(o checkpoint.Options, c *tensor.Ctx) {
		c.WithScope(func() {
			_ = o.Apply(block, autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.25, 2, 5, width)))
		})
	}
	for _, other := range []bool{false, true} {
		o := checkpoint.Options{Offload: &checkpoint.Offload{Keep: -1}}
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5, width))
			c.WithScope(func() { _ = o.Apply(block, x) })
			require.Equal(t, memory.TierStaging, x.Value.Allocation().Tier(), "moved out as its region's forward pass ended")
			if other {
				pass(o, tensor.NewCtx())
			}
			pass(o, c)
			assert.Equal(t, memory.TierDevice, x.Value.Allocation().Tier(),
				"back once its region is forgotten (a pass of another context between: %v)", other)
		})
		require.Zero(t, c.BytesInUse())
	}
}
