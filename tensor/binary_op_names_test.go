package tensor_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// The errors of a binary op name the public function that runs it:
// tensor.Maximum's used to name tensor.Max, which is the reduction.
// Binary called with an op's code names the same function.
func TestBinaryOpErrorsNameTheirFunction(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.Zeros(cpu, tensor.Float32, 2, 3)
		x4 := tensor.Zeros(cpu, tensor.Float32, 4)
		x64 := x.To(tensor.Float64)
		h := x.To(tensor.Float16)
		rel := tensor.Zeros(cpu, tensor.Float32, 2, 3)
		rel.Release()
		binary := func(op tensor.BinaryOp) func(a, b *tensor.Tensor) *tensor.Tensor {
			return func(a, b *tensor.Tensor) *tensor.Tensor { return tensor.Binary(op, a, b) }
		}
		for _, c := range []struct {
			name string
			fn   func(a, b *tensor.Tensor) *tensor.Tensor
		}{
			{"Add", tensor.Add}, {"Sub", tensor.Sub}, {"Mul", tensor.Mul}, {"Div", tensor.Div},
			{"Maximum", tensor.Maximum},
			{"Add", binary(tensor.OpAdd)}, {"Maximum", binary(tensor.OpMax)},
		} {
			for _, bad := range []struct {
				what string
				a, b *tensor.Tensor
				want error
			}{
				{"shapes", x, x4, tensor.ErrShape},
				{"dtypes", x, x64, tensor.ErrDType},
				{"half", h, h, tensor.ErrDType},
				{"released", x, rel, tensor.ErrReleased},
				{"nil", x, nil, tensor.ErrArgument},
			} {
				err := tensor.Try(func() { c.fn(bad.a, bad.b) })
				require.ErrorIs(t, err, bad.want, "%s %s", c.name, bad.what)
				var oe *tensor.OpError
				require.ErrorAs(t, err, &oe, "%s %s", c.name, bad.what)
				assert.Equal(t, c.name, oe.Op, "%s %s: %v", c.name, bad.what, err)
				assert.True(t, strings.HasPrefix(err.Error(), "tensor."+c.name+": "), "%s %s: %v", c.name, bad.what, err)
			}
		}
	})
}
