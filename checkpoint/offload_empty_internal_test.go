package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestOffloadForgetsRegionsWithNothingToMove: a region with nothing for
// Offload to move (no policy, and inputs of another role than
// activation: a batch of role staging, say) is forgotten like any other
// once its forward pass's scope has closed without backward.
func TestOffloadForgetsRegionsWithNothingToMove(t *testing.T) {
	p, off, o := offloadFixture(t)
	c := tensor.NewCtx()
	for range 50 {
		c.WithScope(func() {
			c.WithRole(memory.RoleStaging, func() {
				x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
				_ = o.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Linear(in[0], p, nil) }, x)
			})
		})
	}
	for range 50 {
		c := tensor.NewCtx()
		c.WithScope(func() {
			c.WithRole(memory.RoleStaging, func() {
				x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
				_ = o.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Linear(in[0], p, nil) }, x)
			})
		})
	}
	off.mu.Lock()
	contexts, regions := len(off.live), off.liveRegions(c)
	off.mu.Unlock()
	require.LessOrEqual(t, contexts, 1, "contexts whose passes never ran backward are forgotten")
	require.Zero(t, regions, "the passes of c that never ran backward are forgotten")
	n, _ := off.Regions()
	require.Equal(t, 1, n, "each pass had one region")
}

// TestOffloadForgetsRegionsOverAnOuterInput: regions run in a scope of
// their own on an input of an outer scope (the same batch for every
// forward pass, with recording on and no backward) are forgotten once
// their scope has closed, though their input lives on; they stayed in
// the records, one more each pass, and pushed the input out to host
// memory for the passes after.
func TestOffloadForgetsRegionsOverAnOuterInput(t *testing.T) {
	p, off, o := offloadFixture(t)
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
		for range 10 {
			c.WithScope(func() {
				_ = o.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Linear(in[0], p, nil) }, x)
			})
		}
		off.mu.Lock()
		regions := off.liveRegions(c)
		off.mu.Unlock()
		require.LessOrEqual(t, regions, 1, "the passes that never ran backward are forgotten")
		require.Equal(t, memory.TierDevice, x.Value.Allocation().Tier(), "no later pass moves the input out")
	})
}
