package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestAllFinite: NaN and infinities in every float dtype, float64 entries
// whose squares overflow the float64 sum (finite still), an empty tensor,
// and an integer one refused.
func TestAllFinite(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
			for _, c := range []struct {
				v    []float64
				want bool
			}{
				{[]float64{1, -2, 3}, true},
				{[]float64{1, math.NaN(), 3}, false},
				{[]float64{math.Inf(-1), 0}, false},
				{[]float64{0, math.Inf(1)}, false},
			} {
				x := tensor.FromFloats(cpu, dt, c.v, len(c.v))
				require.Equal(t, c.want, tensor.AllFinite(x), "%v %v", dt, c.v)
			}
		}
		big := tensor.FromFloat64s(cpu, []float64{1e200, -1e300, 5}, 3)
		require.True(t, tensor.AllFinite(big), "squares overflow the sum, the entries are finite")
		require.False(t, tensor.AllFinite(tensor.FromFloat64s(cpu, []float64{1e200, math.Inf(-1)}, 2)))
		require.True(t, tensor.AllFinite(tensor.Zeros(cpu, tensor.Float32, 0, 3)))
		require.ErrorIs(t, tensor.Try(func() { tensor.AllFinite(tensor.FromInt32s(cpu, []int32{1}, 1)) }), tensor.ErrDType)
	})
}

// TestHasNaN: NaN in every float dtype, infinities not, float64 squares
// that overflow not.
func TestHasNaN(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
			require.True(t, tensor.HasNaN(tensor.FromFloats(cpu, dt, []float64{1, math.NaN(), math.Inf(1)}, 3)), "%v", dt)
			require.False(t, tensor.HasNaN(tensor.FromFloats(cpu, dt, []float64{1, math.Inf(-1), math.Inf(1)}, 3)), "%v", dt)
		}
		require.False(t, tensor.HasNaN(tensor.FromFloat64s(cpu, []float64{1e300, -1e300}, 2)))
		require.False(t, tensor.HasNaN(tensor.Zeros(cpu, tensor.Float32, 0)))
		require.ErrorIs(t, tensor.Try(func() { tensor.HasNaN(tensor.FromInt32s(cpu, []int32{1}, 1)) }), tensor.ErrDType)
	})
}
