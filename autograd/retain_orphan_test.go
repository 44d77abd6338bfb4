package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestRetainGraphKeepsParameterOnlyValues: a graph whose intermediate is
// computed from parameters alone (an orphan until an op combines it with
// the caller's data: here only its sum is) and read by its op's backward
// (Tanh reads its output). The first backward op that combined it with a
// gradient adopted it into the pass's own scope, which released it as the
// pass ended: the second pass over the retained graph failed with
// "tensor.TanhBackward: ... was released when the scope that owned it
// closed", where RetainGraph promises the graph for another pass.
func TestRetainGraphKeepsParameterOnlyValues(t *testing.T) {
	cpu := tensor.CPU()
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() { p.ZeroGrad(); p.Value.Release() }()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1.5}))
		h := autograd.Tanh(p)                           // of a parameter alone
		loss := autograd.Mul(autograd.Sum(h, false), x) // adopts the sum, not h
		require.NoError(t, loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
		once := p.Grad.Float32s()
		require.NoError(t, loss.Backward())
		for i, g := range p.Grad.Float32s() {
			require.InDelta(t, 2*once[i], g, 1e-6)
		}
		p.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}
