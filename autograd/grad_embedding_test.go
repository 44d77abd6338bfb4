package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
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
