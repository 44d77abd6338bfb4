package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestEmbeddingBackwardDoutShape: dout must have Embedding's output
// shape, ids.shape + [D]; one of another shape is refused with ErrShape
// naming both shapes, by EmbeddingBackward and EmbeddingBackwardInto
// alike. Before, only the element counts were compared (ids.Numel()*D):
// with D = 0 any dout of no elements passed, and so did one holding the
// same elements in another shape.
func TestEmbeddingBackwardDoutShape(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		ids := tensor.FromInt32s(cpu, []int32{0, 1, 1, 0, 2, 1}, 2, 3)
		for _, dout := range []*tensor.Tensor{
			tensor.Zeros(cpu, tensor.Float32, 5, 0),    // D = 0, 2 ids short of 6
			tensor.Zeros(cpu, tensor.Float32, 3, 2, 4), // the same elements as (2, 3, 4)
			tensor.Zeros(cpu, tensor.Float32, 6, 4),    // ids flattened
		} {
			err := tensor.Try(func() { tensor.EmbeddingBackward(ids, dout, 4) })
			require.ErrorIs(t, err, tensor.ErrShape, "dout %v", dout.Shape())
			require.ErrorContains(t, err, "[2 3]")
			require.ErrorContains(t, err, fmt.Sprint(dout.Shape()))
			table := tensor.Zeros(cpu, tensor.Float32, 4, dout.Shape()[dout.Rank()-1])
			err = tensor.Try(func() { tensor.EmbeddingBackwardInto(table, ids, dout) })
			require.ErrorIs(t, err, tensor.ErrShape, "dout %v", dout.Shape())
		}
		g := tensor.EmbeddingBackward(ids, tensor.Ones(cpu, tensor.Float32, 2, 3, 0), 4)
		require.Equal(t, []int{4, 0}, g.Shape(), "D = 0 with the right shape is fine")
	})
}
