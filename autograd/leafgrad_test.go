package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// A table used by an output head and by an embedding (GPT's tied
// vocabulary table): the head's gradient comes first, and the embedding's
// backward adds its rows into that Grad in place, making no (rows, D)
// gradient of its own; the Grad is the float64 reference's.
func TestTiedEmbeddingGradInPlace(t *testing.T) {
	const rows, dim, n = 64, 32, 6
	rng := rand.New(rand.NewPCG(9, 10))
	w64 := make([]float64, rows*dim)
	w32 := make([]float32, rows*dim)
	for i := range w64 {
		w32[i] = float32(rng.NormFloat64() * 0.1)
		w64[i] = float64(w32[i])
	}
	ids := []int32{3, 7, 3, 63, 0, 7}
	r := make([]float32, n*rows) // the loss is sum(r * logits)
	for i := range r {
		r[i] = float32(rng.NormFloat64())
	}
	wt, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleEmbedding, rows, dim)
	require.NoError(t, err)
	c0 := tensor.NewCtx()
	c0.WithScope(func() { wt.CopyFrom(c0.Adopt(tensor.FromFloat32s(tensor.CPU(), w32, rows, dim))) })
	w := autograd.Param(wt, "wte")
	defer func() {
		w.ZeroGrad()
		w.Value.Release()
	}()
	m := tensor.CPU().Memory()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Embedding(w, c.Adopt(tensor.FromInt32s(tensor.CPU(), ids, n)))
		logits := autograd.MatMul(x, autograd.Transpose(w, 0, 1))
		loss := autograd.Sum(autograd.Mul(logits, autograd.Const(c.Adopt(tensor.FromFloat32s(tensor.CPU(), r, n, rows)))), false)
		m.RecordHistory(0)
		require.NoError(t, loss.Backward())
		m.StopHistory()
	})
	for _, e := range m.History().Events {
		if e.Kind == memory.EventAlloc && e.Op == "EmbeddingBackward" {
			t.Errorf("the embedding's backward allocated %d bytes: its rows go into the head's gradient", e.Size)
		}
	}
	// Reference: d logits = r; the head's part r^T x, the embedding's the
	// rows of r w scattered at ids.
	want := make([]float64, rows*dim)
	for i, id := range ids {
		for v := range rows {
			rv := float64(r[i*rows+v])
			for d := range dim {
				want[v*dim+d] += rv * w64[int(id)*dim+d] // head: dW[v] += r[i,v] x[i]
				want[int(id)*dim+d] += rv * w64[v*dim+d] // embedding: dx[i] = r[i] W
			}
		}
	}
	got := w.Grad.Float32s()
	for i := range want {
		require.InDelta(t, want[i], float64(got[i]), 1e-4, "element %d", i)
	}
}

// A leaf's first gradient, when the backward made it for that leaf alone,
// becomes its Grad without a copy; one shared with another input (Add
// hands both the same gradient) is copied, and the sum is right.
func TestLeafKeepsItsFirstGradient(t *testing.T) {
	const rows, dim = 64, 32
	wt, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, rows, dim)
	require.NoError(t, err)
	w := autograd.Param(wt, "w")
	defer func() {
		w.ZeroGrad()
		w.Value.Release()
	}()
	m := tensor.CPU().Memory()
	copies := func() (n int) {
		for _, e := range m.History().Events {
			if e.Kind == memory.EventAlloc && e.Op == "Clone" && e.Size == rows*dim*4 {
				n++
			}
		}
		return n
	}
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 3, rows, dim))
		loss := autograd.Sum(autograd.Mul(x, w), false)
		m.RecordHistory(0)
		require.NoError(t, loss.Backward())
		m.StopHistory()
	})
	// One copy: Sum's backward materialises the loss's gradient at w's
	// shape; Mul's gradient for w is w's alone and is kept as it is.
	require.Equal(t, 1, copies(), "Mul's gradient for w is kept, not copied")
	require.Equal(t, []float32{3, 3}, w.Grad.Float32s()[:2])
	w.ZeroGrad()
	c.WithScope(func() {
		loss := autograd.Sum(autograd.Add(w, w), false) // of kept tensors only: in no scope
		defer loss.Value.Release()
		m.RecordHistory(0)
		require.NoError(t, loss.Backward())
		m.StopHistory()
	})
	require.Equal(t, 2, copies(), "Sum's, and Add hands both inputs one gradient: the first is copied")
	g := w.Grad.Float32s()
	require.Equal(t, float32(2), g[0])
	require.Equal(t, float32(2), g[len(g)-1])
	require.Zero(t, c.BytesInUse())
}

// A backward that returns one tensor for a leaf and a non-leaf: the leaf
// does not keep that tensor as its Grad, so a later contribution to the
// leaf (added in place) cannot reach the non-leaf's pending gradient.
func TestOneGradientForTwoInputs(t *testing.T) {
	c := tensor.NewCtx()
	a := autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 1, 3), "a")
	u := autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 2, 3), "u")
	defer func() {
		for _, p := range []*autograd.Var{a, u} {
			p.ZeroGrad()
			p.Value.Release()
		}
	}()
	c.WithScope(func() {
		h := autograd.Scale(u, 1)
		x := autograd.Scale(a, 5) // a's second use: its backward runs after the op's, before h's
		op := autograd.Record("Shared", c.Adopt(tensor.Add(a.Value, h.Value)), []*autograd.Var{a, h, x}, func(g *tensor.Tensor) []*tensor.Tensor {
			s := tensor.Scale(g, 3)
			return []*tensor.Tensor{s, s, g.Alias()}
		})
		require.NoError(t, autograd.Sum(op, false).Backward())
	})
	require.Equal(t, []float32{8, 8, 8}, a.Grad.Float32s(), "3 from the op, 5 through x")
	require.Equal(t, []float32{3, 3, 3}, u.Grad.Float32s(), "h's gradient untouched by a's")
}
