package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestAsLeavesAddsAHalfVarsGradient: a retained computed var of a half
// dtype holds a Grad from a first pass; standing as a leaf in AsLeaves,
// it takes a second gradient, which AsLeaves adds to the first when fn
// returns, as keepGrad sums a half Grad (through float32). It used
// AddInPlace, which refuses half arithmetic: the pass failed as fn
// returned and the first gradient was lost.
func TestAsLeavesAddsAHalfVarsGradient(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2}, 2))
		x.SetRequiresGrad(true)
		defer x.ZeroGrad()
		h := autograd.Cast(x, tensor.BFloat16).Retain()
		defer h.ZeroGrad()
		loss := func(k float64) *autograd.Var {
			return autograd.Sum(autograd.Scale(autograd.Cast(h, tensor.Float32), k), false)
		}
		require.NoError(t, loss(1).BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
		require.NoError(t, tensor.Try(func() {
			autograd.AsLeaves([]*autograd.Var{h}, func() {
				if err := loss(3).Backward(); err != nil {
					panic(err)
				}
			})
		}))
		require.Equal(t, tensor.BFloat16, h.Grad.DType())
		require.Equal(t, []float32{4, 4}, h.Grad.Float32s())
		require.False(t, h.IsLeaf(), "h has its node back")
	})
	require.Zero(t, c.BytesInUse())
}
