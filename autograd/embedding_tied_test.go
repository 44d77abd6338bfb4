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
