package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Logits (N, C) take targets (N), as PyTorch's cross_entropy does, and
// the backward ops a dloss (N): targets or gradients of N elements in
// another shape ((N, 1), (1, N)) were read as N values.
func TestCrossEntropyTargetsShape(t *testing.T) {
	tensor.WithScope(func() {
		logits := tensor.Zeros(cpu, tensor.Float32, 2, 3)
		good := tensor.FromInt32s(cpu, []int32{0, 2}, 2)
		dloss := tensor.Ones(cpu, tensor.Float32, 2)
		for _, bad := range [][]int{{2, 1}, {1, 2}} {
			tg := good.Reshape(bad...)
			d := dloss.Reshape(bad...)
			for name, call := range map[string]func(){
				"CrossEntropy":               func() { tensor.CrossEntropy(logits, tg, -100) },
				"CrossEntropyPadded":         func() { tensor.CrossEntropyPadded(logits, 2, tg, -100) },
				"CrossEntropyBackward":       func() { tensor.CrossEntropyBackward(logits, tg, dloss, -100) },
				"CrossEntropyPaddedBackward": func() { tensor.CrossEntropyPaddedBackward(logits, 2, tg, dloss, -100) },
				"CrossEntropyFused":          func() { tensor.CrossEntropyFused(logits, -1, tg, dloss, -100, tensor.Float32) },
				"CrossEntropyBackward dloss": func() { tensor.CrossEntropyBackward(logits, good, d, -100) },
				"CrossEntropyFused dloss":    func() { tensor.CrossEntropyFused(logits, -1, good, d, -100, tensor.Float32) },
			} {
				err := tensor.Try(call)
				require.ErrorIs(t, err, tensor.ErrShape, "%s %v", name, bad)
				require.ErrorContains(t, err, "want logits (N, C)", "%s %v", name, bad)
				require.ErrorContains(t, err, "targets (N)", "%s %v", name, bad)
			}
		}
		// Targets (N) and dloss (N) are taken.
		loss, n := tensor.CrossEntropy(logits, good, -100)
		require.Equal(t, 2, n)
		require.Equal(t, []int{2}, loss.Shape())
		require.Equal(t, []int{2, 3}, tensor.CrossEntropyBackward(logits, good, dloss, -100).Shape())
	})
}
