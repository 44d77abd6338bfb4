package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestEmbeddingHalfTable: outside autocast Embedding gathers the rows of
// a bfloat16 or float16 table as they are, and differentiates them: the
// table's gradient, in its dtype, is the float32 table's on the same
// values within half-precision rounding, also when tied to the output
// head (the head's gradient is the table's Grad by the time the
// embedding's backward adds its rows). Backward failed with
// tensor.EmbeddingBackward's (tied: EmbeddingBackwardInto's) "bfloat16
// operand [2 3 4]: arithmetic runs in float32 and float64": the half
// gradient was scattered as it came.
func TestEmbeddingHalfTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	tensor.WithScope(func() {
		table := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 5, 4)
		ids := tensor.FromInt32s(tensor.CPU(), []int32{0, 3, 3, 1, 0, 4}, 2, 3)
		t.Run("plain", func(t *testing.T) {
			halfOperandsMatchFloat32(t, []*tensor.Tensor{table}, []bool{true}, 1e-2, func(x []*autograd.Var) *autograd.Var {
				return autograd.Embedding(x[0], ids)
			})
		})
		t.Run("tied", func(t *testing.T) {
			halfOperandsMatchFloat32(t, []*tensor.Tensor{table}, []bool{true}, 2e-2, func(x []*autograd.Var) *autograd.Var {
				return autograd.Linear(autograd.Embedding(x[0], ids), x[0], nil)
			})
		})
	})
}
