package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// An axis out of range is named as the caller gave it: a negative axis
// was reported after adding the rank ("axis -1 out of range" for -3 on a
// 2-D tensor, naming a valid axis).
func TestAxisErrorNamesTheGivenAxis(t *testing.T) {
	for _, c := range []struct {
		name, want string
		fn         func(x *tensor.Tensor)
	}{
		{"Sum", "axis -3", func(x *tensor.Tensor) { tensor.Sum(x, false, -3) }},
		{"Transpose", "axis -5", func(x *tensor.Tensor) { x.Transpose(0, -5) }},
		{"Narrow", "axis -3", func(x *tensor.Tensor) { x.Narrow(-3, 0, 1) }},
		{"Unsqueeze", "axis -4", func(x *tensor.Tensor) { x.Unsqueeze(-4) }},
	} {
		tensor.WithScope(func() {
			x := tensor.Zeros(cpu, tensor.Float32, 2, 3)
			err := tensor.Try(func() { c.fn(x) })
			require.ErrorIs(t, err, tensor.ErrShape, c.name)
			require.ErrorContains(t, err, c.want, c.name)
		})
	}
}
