package tensor_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Shapes that do not broadcast are named once, with the sentinel's text
// once: the op's error wrapped BroadcastShapes' error, which already
// ended in it ("...: shape mismatch: shape mismatch").
func TestBroadcastErrorSaysItOnce(t *testing.T) {
	for _, c := range []struct {
		name, want string
		fn         func(a, b *tensor.Tensor)
	}{
		{"Add", "shapes [2 3] and [3 2] do not broadcast", func(a, b *tensor.Tensor) { tensor.Add(a, b) }},
		{"MatMul", "batch axes of [2 2 3] and [3 3 2]", func(a, b *tensor.Tensor) {
			tensor.MatMul(a.Reshape(2, 1, 3).Expand(2, 2, 3), b.Reshape(1, 3, 2).Expand(3, 3, 2))
		}},
	} {
		tensor.WithScope(func() {
			a := tensor.Zeros(cpu, tensor.Float32, 2, 3)
			b := tensor.Zeros(cpu, tensor.Float32, 3, 2)
			err := tensor.Try(func() { c.fn(a, b) })
			require.ErrorIs(t, err, tensor.ErrShape, c.name)
			require.ErrorContains(t, err, c.want, c.name)
			require.Equal(t, 1, strings.Count(err.Error(), tensor.ErrShape.Error()), c.name+": %v", err)
		})
	}
}
