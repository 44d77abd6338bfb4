package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// BackwardWith(y, r) gives the gradients of Backward(Σ y·r), bit for bit;
// it refuses a leaf, a nil gradient and one of another shape.
func TestBackwardWith(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	c := tensor.NewCtx()
	w := autograd.Param(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 5, 4), "w")
	defer w.Value.Release()
	x := c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3, 4)
	r := c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3, 5)
	tensor.Keep(x, r)
	defer x.Release()
	defer r.Release()
	grads := func(f func(y *autograd.Var) error) (gw, gx []float32) {
		c.WithScope(func() {
			xv := autograd.Const(c.Adopt(x.Alias())) // in c: so is all that is computed from it
			xv.SetRequiresGrad(true)
			require.NoError(t, f(autograd.Linear(xv, w, nil)))
			gw, gx = w.Grad.Float32s(), xv.Grad.Float32s()
			w.ZeroGrad()
			xv.ZeroGrad()
		})
		return gw, gx
	}
	gw1, gx1 := grads(func(y *autograd.Var) error { return autograd.Sum(autograd.Mul(y, autograd.Const(r)), false).Backward() })
	gw2, gx2 := grads(func(y *autograd.Var) error { return y.BackwardWith(r) })
	require.Equal(t, gw1, gw2)
	require.Equal(t, gx1, gx2)

	c.WithScope(func() {
		y := autograd.Linear(autograd.Const(c.Adopt(x.Alias())), w, nil)
		require.ErrorContains(t, y.BackwardWith(nil), "nil gradient")
		require.ErrorContains(t, y.BackwardWith(x), "gradient float32 [2 3 4] for a value of float32 [2 3 5]")
		require.ErrorIs(t, w.BackwardWith(r), autograd.ErrNoGraph)
		require.NoError(t, y.BackwardWith(r))
		require.ErrorIs(t, y.BackwardWith(r), autograd.ErrNoGraph, "the graph was consumed")
		w.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse()-x.Bytes()-r.Bytes()-w.Value.Bytes())
}

// RecordRegion's output requires a gradient whatever its inputs, and its
// backward runs with recording on even when Backward is called under
// NoGradIn.
func TestRecordRegion(t *testing.T) {
	c := tensor.NewCtx()
	w := autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 2, 3), "w")
	defer w.Value.Release()
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 3))
		var recorded bool
		y := autograd.RecordRegion("R", autograd.Mul(x, w).Value, []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
			recorded = autograd.GradEnabledIn(c)
			z := autograd.Mul(autograd.Const(g), w)
			if err := z.BackwardWith(x.Value); err != nil {
				panic(err)
			}
			return []*tensor.Tensor{nil}
		})
		require.True(t, y.RequiresGrad())
		require.False(t, y.IsLeaf())
		loss := autograd.Sum(y, false)
		autograd.NoGradIn(c, func() { require.NoError(t, loss.Backward()) })
		require.True(t, recorded)
		require.Equal(t, []float32{1, 1, 1}, w.Grad.Float32s())
		w.ZeroGrad()
		autograd.NoGradIn(c, func() {
			require.False(t, autograd.RecordRegion("R", c.Ones(tensor.CPU(), tensor.Float32, 1), nil, nil).RequiresGrad())
		})
	})
}

// hookLog is an OpHook that logs the calls and can hand back outputs.
type hookLog struct {
	calls []string
	give  map[string][]*tensor.Tensor
}

func (h *hookLog) Enter(op string) []*tensor.Tensor {
	h.calls = append(h.calls, "enter "+op)
	return h.give[op]
}

func (h *hookLog) Leave(op string, outs ...*tensor.Tensor) {
	h.calls = append(h.calls, "leave "+op)
}

// The hooked ops consult the context's hook in program order, nested
// calls inside; an op takes the outputs the hook hands back; other
// contexts and the region outside WithOpHook are not affected.
func TestOpHook(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
		w := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 4, 4))
		h := &hookLog{}
		autograd.WithOpHook(c, h, func() {
			require.Equal(t, h, autograd.OpHookIn(c))
			require.Nil(t, autograd.OpHookIn(tensor.NewCtx()))
			y := autograd.LayerNorm(x, nil, nil, 1e-5)
			autograd.WithOpHook(c, nil, func() { autograd.Linear(y, w, nil) }) // shielded
			autograd.GeluLinear(autograd.MatMul(y, w), w, nil)
		})
		require.Nil(t, autograd.OpHookIn(c))
		require.Equal(t, []string{"enter LayerNorm", "leave LayerNorm", "enter MatMul", "leave MatMul",
			"enter GeluLinear", "enter Gelu", "leave Gelu", "leave GeluLinear"}, h.calls)

		canned := c.Full(tensor.CPU(), tensor.Float32, 7, 2, 4)
		h = &hookLog{give: map[string][]*tensor.Tensor{"GeluLinear": {canned}}}
		var y *autograd.Var
		autograd.WithOpHook(c, h, func() { y = autograd.GeluLinear(x, w, nil) })
		require.Same(t, canned, y.Value)
		require.Equal(t, []string{"enter GeluLinear"}, h.calls, "nothing computed, nothing nested entered")
	})
	require.Zero(t, c.BytesInUse())
}

// A GELU output the op hook hands back to GeluLinear (a selective
// checkpoint's recomputation whose policy saves "Gelu" but not
// "GeluLinear") is what backward's weight gradient reads: the product was
// made from it, and it is not computed again. A canned output of 7s
// (GELU(1) is 0.84) shows which one backward used.
func TestGeluLinearKeepsHandedBackGelu(t *testing.T) {
	c := tensor.NewCtx()
	w := autograd.Param(c.Ones(tensor.CPU(), tensor.Float32, 3, 4), "w")
	defer w.Value.Release()
	c.WithScope(func() {
		u := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, 4))
		canned := c.Full(tensor.CPU(), tensor.Float32, 7, 2, 4)
		h := &hookLog{give: map[string][]*tensor.Tensor{"Gelu": {canned}}}
		var y *autograd.Var
		autograd.WithOpHook(c, h, func() { y = autograd.GeluLinear(u, w, nil) })
		require.Equal(t, []string{"enter GeluLinear", "enter Gelu", "leave GeluLinear"}, h.calls)
		for _, v := range y.Value.Float32s() {
			require.Equal(t, float32(28), v, "the product of the canned GELU")
		}
		require.NoError(t, autograd.Sum(y, false).Backward())
		for _, g := range w.Grad.Float32s() {
			require.Equal(t, float32(14), g, "dL/dw = Σ rows of the GELU output the product read (7 + 7)")
		}
		w.ZeroGrad()

		// Computed by the op (the hook hands nothing back): recomputed in
		// backward, GELU(1) per row (the tanh form, as GPT-2's).
		autograd.WithOpHook(c, &hookLog{}, func() { y = autograd.GeluLinear(u, w, nil) })
		require.NoError(t, autograd.Sum(y, false).Backward())
		for _, g := range w.Grad.Float32s() {
			require.InDelta(t, 2*0.5*(1+math.Tanh(math.Sqrt(2/math.Pi)*1.044715)), g, 1e-5)
		}
		w.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse()-w.Value.Bytes())
}
