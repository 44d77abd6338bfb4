package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestRetainGraph: a pass with RetainGraph leaves the graph whole, so a
// second pass (from the root or from a var below it) gives the same
// gradients, added to the first's; a pass without it then consumes the
// graph, and a pass after that is ErrNoGraph, saying how to keep it. The
// scope releases what the graph held; a checkpointed region recomputes in
// each pass.
func TestRetainGraph(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	defer w.Value.Release()
	for _, ckpt := range []*checkpoint.Options{nil, {}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, -1, 0.5}, 2, 2))
			block := func(in ...*autograd.Var) *autograd.Var {
				return autograd.Tanh(autograd.Mul(autograd.MatMul(in[0], w), in[0]))
			}
			var h *autograd.Var
			if ckpt != nil {
				h = ckpt.Apply(block, x)
			} else {
				h = block(x)
			}
			mid := autograd.Exp(h)
			loss := autograd.Sum(autograd.Mul(mid, mid), false)

			require.NoError(t, loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
			once := w.Grad.Float32s()
			require.NoError(t, loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
			twice := w.Grad.Float32s()
			for i := range once {
				require.InDelta(t, 2*once[i], twice[i], 1e-5*(1+float64(abs32(once[i]))), "ckpt %+v: element %d", ckpt, i)
			}
			w.ZeroGrad()

			// From a var below the root, with a seed gradient.
			seed := c.Full(cpu, tensor.Float32, 1, 2, 2)
			require.NoError(t, mid.BackwardOpts(autograd.BackwardOptions{Grad: seed, RetainGraph: true}))
			require.NotNil(t, w.Grad)
			w.ZeroGrad()

			require.NoError(t, loss.Backward()) // consumes
			require.Equal(t, once, w.Grad.Float32s(), "ckpt %+v: the consuming pass", ckpt)
			w.ZeroGrad()
			err := loss.Backward()
			require.ErrorIs(t, err, autograd.ErrNoGraph)
			require.ErrorContains(t, err, "RetainGraph")
		})
		require.Zero(t, c.BytesInUse(), "ckpt %+v: the scope released what the graph held", ckpt)
	}

	// Errors are Backward's and BackwardWith's.
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2}, 1, 2))
		y := autograd.MatMul(x, w)
		require.ErrorContains(t, y.BackwardOpts(autograd.BackwardOptions{}), "want a scalar, have shape [1 2]")
		require.ErrorContains(t, y.BackwardOpts(autograd.BackwardOptions{Grad: c.Full(cpu, tensor.Float32, 1, 2)}), "gradient float32 [2] for a value of float32 [1 2]")
		require.ErrorIs(t, (*autograd.Var)(nil).BackwardOpts(autograd.BackwardOptions{}), tensor.ErrArgument)
		require.ErrorIs(t, x.BackwardOpts(autograd.BackwardOptions{}), autograd.ErrNoGraph)
	})
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
