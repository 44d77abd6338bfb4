package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// EmbeddingBackwardInto adds each id's rows of dout into dtable after what
// it held, in the order of ids: against a float64 reference, and against
// EmbeddingBackward plus the table (equal up to the order of the sums).
func TestEmbeddingBackwardInto(t *testing.T) {
	const rows, dim = 6, 5
	rng := rand.New(rand.NewPCG(3, 4))
	ids := []int32{0, 2, 2, 5, 0, 1, 2, 5}
	g0 := make([]float32, rows*dim)
	dout := make([]float32, len(ids)*dim)
	for i := range g0 {
		g0[i] = float32(rng.NormFloat64())
	}
	for i := range dout {
		dout[i] = float32(rng.NormFloat64())
	}
	want := make([]float64, rows*dim)
	for i, v := range g0 {
		want[i] = float64(v)
	}
	for i, id := range ids {
		for c := range dim {
			want[int(id)*dim+c] += float64(dout[i*dim+c])
		}
	}
	c := tensor.NewCtx()
	c.WithScope(func() {
		cpu := tensor.CPU()
		dt := c.Adopt(tensor.FromFloat32s(cpu, g0, rows, dim))
		ti := c.Adopt(tensor.FromInt32s(cpu, ids, 2, 4))
		td := c.Adopt(tensor.FromFloat32s(cpu, dout, 2, 4, dim))
		dense := c.Adopt(tensor.EmbeddingBackward(ti, td, rows))
		tensor.EmbeddingBackwardInto(dt, ti, td)
		got, sep := dt.Float32s(), dense.Float32s()
		for i := range want {
			require.InDelta(t, want[i], float64(got[i]), 1e-5, "element %d", i)
			require.InDelta(t, float64(g0[i]+sep[i]), float64(got[i]), 1e-5, "element %d against EmbeddingBackward", i)
		}
	})
	require.Zero(t, c.BytesInUse())
}
