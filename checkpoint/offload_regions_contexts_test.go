package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestOffloadRegionsOfInterleavedContexts: two contexts share one
// Offload (two models of one kind, or two goroutines, training at once)
// and their forward passes interleave, region by region: a's three
// regions over (2, 5, C) inputs, b's two over (2, 3, C). Regions reports
// one context's pass, never the two counted as one: before the fix the
// pass statistics were the Offload's, so a's and b's regions added up
// (4 regions, with a's largest, as a's third region ended) and stayed
// mixed after both backward passes.
func TestOffloadRegionsOfInterleavedContexts(t *testing.T) {
	n := newNet(11)
	defer n.release()
	off := &checkpoint.Offload{}
	o := checkpoint.Options{Offload: off}
	block := func(in ...*autograd.Var) *autograd.Var { return n.block(in[0]) }
	ca, cb := tensor.NewCtx(), tensor.NewCtx()
	sa, sb := ca.NewScope(), cb.NewScope()
	ya := autograd.Const(ca.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5, width))
	yb := autograd.Const(cb.Full(tensor.CPU(), tensor.Float32, 0.25, 2, 3, width))
	inA, inB := ya.Value.Allocation().Size(), yb.Value.Allocation().Size()
	require.NotEqual(t, inA, inB)
	for k := range 3 {
		ya = o.Apply(block, ya)
		if k < 2 {
			yb = o.Apply(block, yb)
		}
	}
	regions, largest := off.Regions()
	assert.Equal(t, 3, regions, "a's pass, whose region ran last")
	assert.Equal(t, inA, largest, "a's pass, whose region ran last")

	require.NoError(t, autograd.Sum(ya, false).Backward())
	regions, largest = off.Regions()
	assert.Equal(t, 3, regions, "a's pass, over")
	assert.Equal(t, inA, largest, "a's pass, over")

	require.NoError(t, autograd.Sum(yb, false).Backward())
	regions, largest = off.Regions()
	assert.Equal(t, 2, regions, "b's pass, the last to end")
	assert.Equal(t, inB, largest, "b's pass, the last to end")

	sb.Close()
	sa.Close()
	for _, p := range n.params() {
		p.ZeroGrad()
	}
	require.Zero(t, ca.BytesInUse())
	require.Zero(t, cb.BytesInUse())
}
