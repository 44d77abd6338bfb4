package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

func TestGradMisc(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 3, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	c.WithScope(func() {
		x := autograd.Mul(w, autograd.Const(c.Full(cpu, tensor.Float32, 2, 3, 2)))
		a := autograd.Narrow(x, 0, 0, 1)
		b := autograd.Narrow(x, 0, 2, 1)
		loss := autograd.Sum(autograd.Mul(autograd.Add(a, b), a), false)
		ro := autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}}
		g1, err := autograd.Grad(loss, []*autograd.Var{x, loss, w}, ro)
		require.NoError(t, err)
		g2, err := autograd.Grad(loss, []*autograd.Var{w, x}, ro)
		require.NoError(t, err)
		require.Equal(t, g1[0].Float32s(), g2[1].Float32s())
		require.Equal(t, g1[2].Float32s(), g2[0].Float32s())
		require.Equal(t, []float32{1}, g1[1].Float32s())
		// x = 2w; loss = sum((x0+x2)*x0): d/dx0 = 2x0+x2, d/dx2 = x0
		require.Equal(t, []float32{2*2 + 10, 2*4 + 12, 0, 0, 2, 4}, g1[0].Float32s())
		require.NoError(t, loss.Backward())
		require.Equal(t, g1[2].Float32s(), w.Grad.Float32s())
		w.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}

// Grad with respect to a half leaf that two ops use sums its two
// gradients through float32, as Backward sums its Grad; it failed with
// AddInPlace's refusal of bfloat16 arithmetic.
func TestGradSumsAHalfLeafsGradients(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	c.WithScope(func() {
		p := autograd.Param(c.FromFloats(cpu, tensor.BFloat16, []float64{1, 2, 3, 4, 5, 6}, 3, 2), "p")
		c.Adopt(p.Value)
		f := func() *autograd.Var {
			a := autograd.Sum(autograd.Cast(p, tensor.Float32), false)
			b := autograd.Sum(autograd.Scale(autograd.Cast(p, tensor.Float32), 2), false)
			return autograd.Add(a, b)
		}
		gs, err := autograd.Grad(f(), []*autograd.Var{p}, autograd.GradOptions{})
		require.NoError(t, err)
		require.Equal(t, tensor.BFloat16, gs[0].DType())
		require.Equal(t, []float32{3, 3, 3, 3, 3, 3}, gs[0].Float32s())
		require.Nil(t, p.Grad, "Grad fills no Grad")
		require.NoError(t, f().Backward())
		require.Equal(t, gs[0].Float32s(), p.Grad.Float32s())
		p.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}
