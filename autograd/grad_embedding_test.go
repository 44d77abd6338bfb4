package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestGradEmbeddingWithGrad: Grad with respect to an embedding table
// that already holds a Grad (gradient accumulation, or a tied head's
// contribution from an earlier Backward) must return the table's gradient
// and leave table.Grad alone.
func TestGradEmbeddingWithGrad(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	table := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 3, 2), "table")
	defer func() { table.ZeroGrad(); table.Value.Release() }()
	c.WithScope(func() {
		ids := c.FromInt32s(cpu, []int32{0, 2}, 2)
		// A first Backward leaves a Grad on the table.
		require.NoError(t, autograd.Sum(autograd.Embedding(table, ids), false).Backward())
		before := table.Grad.Float32s()

		loss := autograd.Sum(autograd.Embedding(table, ids), false)
		gs, err := autograd.Grad(loss, []*autograd.Var{table}, autograd.GradOptions{})
		require.NoError(t, err)
		require.Equal(t, []float32{1, 1, 0, 0, 1, 1}, gs[0].Float32s())
		require.Equal(t, before, table.Grad.Float32s(), "Grad must not change a leaf's Grad")
		table.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}

// An embedding table passed to a checkpointed region takes its gradient
// inside as a computed var's, in the layout its consumers made it: Add
// hands x and z views of one gradient, and x's Grad then shares z's
// pending gradient's storage. The embedding's backward added its rows
// into that Grad in place, into z's gradient too, so the rows came back
// through z's Scale three more times. The region must give what the
// plain graph gives.
func TestEmbeddingInARegionAddsItsRowsOnce(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	table := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 3, 2), "table")
	defer table.Value.Release()
	for _, ckpt := range []bool{false, true} {
		c.WithScope(func() {
			ids := c.FromInt32s(cpu, []int32{0, 2, 2}, 3)
			ones := autograd.Const(c.Ones(cpu, tensor.Float32, 3, 2))
			weigh := func(v *autograd.Var) *autograd.Var { return autograd.Sum(autograd.Mul(v, ones), false) }
			// Stepped backward: Add (x's Grad and z's pending share a
			// storage), then Embedding, then Scale (z's gradient read).
			f := func(in ...*autograd.Var) *autograd.Var {
				x := in[0]
				z := autograd.Scale(x, 3)
				p := weigh(z)
				e := weigh(autograd.Embedding(x, ids))
				return autograd.Add(autograd.Add(p, e), weigh(autograd.Add(x, z)))
			}
			x := autograd.Mul(table, ones) // of c: the region runs in c
			var loss *autograd.Var
			if ckpt {
				loss = checkpoint.Apply(f, x)
			} else {
				loss = f(x)
			}
			require.NoError(t, loss.Backward())
			// 3 (p) + 1 + 3 (x + z), and each id's row once more.
			require.Equal(t, []float32{8, 8, 7, 7, 9, 9}, table.Grad.Float32s(), "checkpointed %v", ckpt)
			table.ZeroGrad()
		})
	}
}
