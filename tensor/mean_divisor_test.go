package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// MeanDivisor is the number n of counted targets (1 when every target is
// ignored), in float32 and float64, on every device; dividing by it
// divides as by the host's n, bit for bit.
func TestMeanDivisor(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			ids := make([]int32, 3000)
			n := 0
			for i := range ids {
				ids[i] = int32(i % 7)
				if i%5 == 0 {
					ids[i] = -100
				} else {
					n++
				}
			}
			targets := tensor.FromInt32s(dev, ids, 30, 100)
			for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
				s := tensor.MeanDivisor(targets, -100, dt)
				require.Equal(t, dt, s.DType())
				require.Empty(t, s.Shape())
				require.Equal(t, float64(n), s.Item())

				g := tensor.Arange(dev, dt, 0, 12).Reshape(3, 4)
				want := make([]float64, 12)
				for i := range want {
					if dt == tensor.Float32 {
						want[i] = float64(float32(i) / float32(n))
					} else {
						want[i] = float64(i) / float64(n)
					}
				}
				require.Equal(t, want, tensor.Div(g, s).Float64s())
			}
			none := tensor.FromInt32s(dev, []int32{-100, -100}, 2)
			require.Equal(t, 1.0, tensor.MeanDivisor(none, -100, tensor.Float32).Item())

			x := tensor.Zeros(dev, tensor.Float32, 3, 4)
			require.ErrorIs(t, tensor.Try(func() { tensor.MeanDivisor(targets, -100, tensor.BFloat16) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.MeanDivisor(x, -100, tensor.Float32) }), tensor.ErrDType)
		})
	})
}
