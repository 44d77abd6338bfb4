package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// CrossEntropy takes logits (N, C) with targets (N), and LinearCrossEntropy
// h (..., C) with targets of h's leading shape, as PyTorch's
// cross_entropy and nn.CrossEntropy do: targets of as many elements in
// another shape ((N, 1); (B*T) for h (B, T, C)) were taken.
func TestCrossEntropyTargetsShape(t *testing.T) {
	tensor.WithScope(func() {
		logits := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 4, 3))
		tg := tensor.FromInt32s(tensor.CPU(), []int32{0, 1, 2, 0}, 4)
		err := tensor.Try(func() { autograd.CrossEntropy(logits, tg.Reshape(4, 1)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "logits [4 3], targets [4 1]: want logits (N, C) and targets (N)")

		h := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 2, 5))
		w := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 3, 5))
		for _, shape := range [][]int{{4}, {2, 2, 1}, {4, 1}} {
			err = tensor.Try(func() { autograd.LinearCrossEntropy(h, w, tg.Reshape(shape...), 0) })
			require.ErrorIs(t, err, tensor.ErrShape, "%v", shape)
			require.ErrorContains(t, err, "want h's leading shape [2 2]", "%v", shape)
		}
		require.NoError(t, tensor.Try(func() { autograd.LinearCrossEntropy(h, w, tg.Reshape(2, 2), 0) }))
		require.NoError(t, tensor.Try(func() { autograd.CrossEntropy(logits, tg) }))
	})
}
