package checkpoint_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestSideReadReleasedNamesTheRegion: a checkpointed function reads a var
// computed outside it, h, only in a side computation (a scalar of it
// scales the result), so h is no input of the region's node; the loss
// also uses h on a branch backward steps first, which releases h's value
// before the region recomputes. The recomputation's failure must name the
// region and say what to do (the op's own error, "tensor.Sum: ... was
// released", named neither); with h passed as an input instead, the
// gradients are the plain graph's.
func TestSideReadReleasedNamesTheRegion(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	run := func(mode string) (grad []float32, err error) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			x.SetRequiresGrad(true)
			h := autograd.Tanh(autograd.MatMul(x, w))
			body := func(in *autograd.Var, h *autograd.Var) *autograd.Var {
				s := autograd.Sum(h, false)
				scale := float64(s.Value.Float32s()[0])
				return autograd.Scale(autograd.Tanh(autograd.MatMul(in, w)), scale)
			}
			var y *autograd.Var
			switch mode {
			case "plain":
				y = body(x, h)
			case "side read":
				y = checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return body(in[0], h) }, x)
			case "as an input":
				y = checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return body(in[0], in[1]) }, x, h)
			}
			// Backward steps h's branch (and h) before the region.
			loss := autograd.Sum(autograd.Add(y, autograd.Mul(h, x)), false)
			if err = loss.Backward(); err == nil {
				grad = w.Grad.Float32s()
			}
			x.ZeroGrad()
		})
		w.ZeroGrad()
		require.Zero(t, c.BytesInUse())
		return grad, err
	}
	want, err := run("plain")
	require.NoError(t, err)
	got, err := run("as an input")
	require.NoError(t, err)
	require.InDeltaSlice(t, want, got, 1e-6)
	_, err = run("side read")
	require.Error(t, err)
	require.True(t, errors.Is(err, tensor.ErrReleased), "%v", err)
	var oe *tensor.OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "checkpoint.Apply", oe.Op, "%v", err)
	require.Contains(t, err.Error(), "pass its var as an input")
}
