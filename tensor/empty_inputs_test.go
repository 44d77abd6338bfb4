package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// dirtyPool leaves n float32 blocks of 7777 in the CPU pool, which an op's
// next outputs of that size are likely to get back: an output the op
// forgets to write then reads 7777, not a lucky zero.
func dirtyPool(n int) {
	for range 4 {
		tensor.Full(cpu, tensor.Float32, 7777, n).Release()
	}
}

// Ops on empty or degenerate inputs give PyTorch's result for empty
// tensors (an empty output, or the defined value: a sum of nothing is 0,
// a mean NaN) or an error, never an output they did not write.
func TestEmptyInputsGiveDefinedResults(t *testing.T) {
	f32 := tensor.Float32
	tensor.WithScope(func() {
		// A product over k = 0 is zeros (torch.mm of (2, 0) and (0, 3)).
		a, b := tensor.Zeros(cpu, f32, 2, 0), tensor.Zeros(cpu, f32, 0, 3)
		dirtyPool(6)
		require.Equal(t, make([]float64, 6), tensor.MatMul(a, b).Float64s())
		dirtyPool(2)
		c, sums := tensor.MatMulRowSums(a, b, tensor.MatMulMode{})
		require.Equal(t, make([]float64, 6), c.Float64s())
		require.Equal(t, []float64{0, 0}, sums.Float64s())

		// Sum over an empty axis is 0, Mean NaN, Max an error.
		e := tensor.Zeros(cpu, f32, 3, 0)
		dirtyPool(3)
		require.Equal(t, []float64{0, 0, 0}, tensor.Sum(e, false, 1).Float64s())
		for _, v := range tensor.Mean(e, false, 1).Float64s() {
			require.True(t, math.IsNaN(v))
		}
		require.ErrorIs(t, tensor.Try(func() { tensor.Max(e, false, 1) }), tensor.ErrShape)

		// Softmax over an empty axis, causal ops with T = 0, and Concat of
		// empty tensors are empty.
		require.Equal(t, []int{3, 0}, tensor.Softmax(e).Shape())
		require.Equal(t, []int{3, 0}, tensor.LogSoftmax(e).Shape())
		t0 := tensor.Zeros(cpu, f32, 2, 0, 0)
		require.Equal(t, []int{2, 0, 0}, tensor.CausalSoftmax(t0).Shape())
		require.Equal(t, []int{3, 0}, tensor.Concat(1, e, e).Shape())
		require.Equal(t, []int{6, 0}, tensor.Concat(0, e, e).Shape())

		// Attention with T = 0 or no heads: empty out and lse.
		for _, shape := range [][]int{{2, 0, 4}, {0, 3, 4}} {
			q := tensor.Zeros(cpu, f32, shape...)
			out, lse := tensor.FusedCausalAttention(q, q, q, 0, 0, 0)
			require.Zero(t, out.Numel())
			require.Zero(t, lse.Numel())
		}

		// An empty batch: LayerNorm's weight and bias gradients are zeros.
		x, w, m := tensor.Zeros(cpu, f32, 0, 3), tensor.Ones(cpu, f32, 3), tensor.Zeros(cpu, f32, 0)
		dirtyPool(3)
		dx, dw, db := tensor.LayerNormBackward(x, x, m, m, w, true)
		require.Zero(t, dx.Numel())
		require.Equal(t, []float64{0, 0, 0}, dw.Float64s())
		require.Equal(t, []float64{0, 0, 0}, db.Float64s())
		// Rows of 0 elements normalise to nothing, as PyTorch's
		// native_layer_norm: an empty y, mean 0 and rstd NaN (a variance of
		// 0/0); the gradients are empty (golden case layer_norm_empty).
		dirtyPool(3)
		y, mean, rstd := tensor.LayerNorm(e, tensor.Zeros(cpu, f32, 0), tensor.Zeros(cpu, f32, 0), 1e-5)
		require.Equal(t, []int{3, 0}, y.Shape())
		require.Equal(t, []float64{0, 0, 0}, mean.Float64s())
		for _, v := range rstd.Float64s() {
			require.True(t, math.IsNaN(v), "rstd %v", v)
		}
		dx, dw, db = tensor.LayerNormBackward(y, e, mean, rstd, tensor.Zeros(cpu, f32, 0), true)
		require.Equal(t, []int{3, 0}, dx.Shape())
		require.Equal(t, []int{0}, dw.Shape())
		require.Equal(t, []int{0}, db.Shape())

		// A vocabulary of 0: ignored rows have loss 0, any other target is
		// out of range.
		logits := tensor.Zeros(cpu, f32, 2, 0)
		ignored := tensor.FromInt32s(cpu, []int32{-100, -100}, 2)
		dirtyPool(2)
		loss, n := tensor.CrossEntropy(logits, ignored, -100)
		require.Equal(t, []float64{0, 0}, loss.Float64s())
		require.Zero(t, n)
		target := tensor.FromInt32s(cpu, []int32{0, -100}, 2)
		require.ErrorIs(t, tensor.Try(func() { tensor.CrossEntropy(logits, target, -100) }), tensor.ErrArgument)

		// No ids: an empty (0, D) lookup.
		table := tensor.Zeros(cpu, f32, 4, 3)
		ids := tensor.FromInt32s(cpu, nil, 0)
		require.Equal(t, []int{0, 3}, tensor.Embedding(table, ids).Shape())
	})
}
