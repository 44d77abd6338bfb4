package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestGrad: autograd.Grad gives Backward's gradients for leaves and the
// gradients of computed vars, fills no Grad, takes a var twice, refuses
// what it cannot answer, and leaves nothing behind in its context
// (through checkpointed regions: grad_region_test.go).
func TestGrad(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	b := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.1, -0.2}, 2), "b")
	u := autograd.Param(tensor.FromFloat32s(cpu, []float32{3}, 1), "unused")
	defer func() { w.Value.Release(); b.Value.Release(); u.Value.Release() }()
	x := func() *autograd.Var { return autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, -1, 0.5}, 2, 2)) }
	forward := func(in *autograd.Var) (h, loss *autograd.Var) {
		h = autograd.Tanh(autograd.Add(autograd.MatMul(in, w), b))
		return h, autograd.Sum(autograd.Mul(h, h), false)
	}

	// Backward's gradients, for reference; h's by Retain.
	var wantW, wantB, wantH []float32
	c.WithScope(func() {
		h, loss := forward(x())
		h.Retain()
		require.NoError(t, loss.Backward())
		wantW, wantB, wantH = w.Grad.Float32s(), b.Grad.Float32s(), h.Grad.Float32s()
		w.ZeroGrad()
		b.ZeroGrad()
		h.ZeroGrad()
	})

	c.WithScope(func() {
		h, loss := forward(x())
		gs, err := autograd.Grad(loss, []*autograd.Var{w, h, b, w}, autograd.GradOptions{})
		require.NoError(t, err)
		require.Len(t, gs, 4)
		require.Equal(t, wantW, gs[0].Float32s())
		require.Equal(t, wantH, gs[1].Float32s())
		require.Equal(t, wantB, gs[2].Float32s())
		require.Equal(t, wantW, gs[3].Float32s())
		require.False(t, gs[0].SharesStorage(h.Value))
		require.Nil(t, w.Grad, "Grad fills no leaf's Grad")
		require.Nil(t, b.Grad)
		require.Nil(t, h.Grad)
		require.ErrorIs(t, loss.Backward(), autograd.ErrNoGraph, "the graph is consumed")
	})
	require.Zero(t, c.BytesInUse(), "the gradients belong to the caller's scope")

	c.WithScope(func() {
		_, loss := forward(x())
		// Only b: the products' backward (w's gradient) need not run.
		gs, err := autograd.Grad(loss, []*autograd.Var{b}, autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
		require.NoError(t, err)
		require.Equal(t, wantB, gs[0].Float32s())
		_, err = autograd.Grad(loss, []*autograd.Var{u}, autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "is not reached from")
		gs, err = autograd.Grad(loss, []*autograd.Var{u, w}, autograd.GradOptions{AllowUnused: true, BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
		require.NoError(t, err)
		require.Nil(t, gs[0])
		require.Equal(t, wantW, gs[1].Float32s())
		_, err = autograd.Grad(loss, []*autograd.Var{x()}, autograd.GradOptions{})
		require.ErrorContains(t, err, "does not require gradients")
		_, err = autograd.Grad(loss, []*autograd.Var{nil}, autograd.GradOptions{})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.NoError(t, loss.Backward(), "the retained graph is still whole")
		require.Equal(t, wantW, w.Grad.Float32s())
		w.ZeroGrad()
		b.ZeroGrad()
	})

	require.Zero(t, c.BytesInUse())
}

// TestGradFreesTheGraph: without RetainGraph, Grad consumes the whole
// graph as Backward does (PyTorch frees it), the ops it did not need to
// run included: what they held goes at once, not when the scope closes,
// and a later pass is ErrNoGraph.
func TestGradFreesTheGraph(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	w1 := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w1")
	w2 := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 0.5, -0.5, 1}, 2, 2), "w2")
	defer func() { w1.Value.Release(); w2.Value.Release() }()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, -1, 0.5}, 2, 2))
		h1 := autograd.Tanh(autograd.MatMul(x, w1))
		h2 := autograd.Tanh(autograd.MatMul(h1, w2))
		loss := autograd.Sum(autograd.Mul(h2, h2), false)
		gs, err := autograd.Grad(loss, []*autograd.Var{h2}, autograd.GradOptions{})
		require.NoError(t, err)
		require.Equal(t, x.Value.Bytes()+loss.Value.Bytes()+gs[0].Bytes(), c.BytesInUse(),
			"the input, the loss and the gradient: h1's and the products' values are gone")
		require.ErrorIs(t, loss.Backward(), autograd.ErrNoGraph)
		require.Nil(t, w1.Grad)
	})
	require.Zero(t, c.BytesInUse())
}
