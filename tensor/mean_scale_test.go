package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// MeanScale is 1/n of the counted targets (0 when every target is
// ignored), in float32 and float64, on every device; multiplying by it
// scales as ScaleInPlace scales by the host's 1/n, bit for bit.
func TestMeanScale(t *testing.T) {
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
				s := tensor.MeanScale(targets, -100, dt)
				require.Equal(t, dt, s.DType())
				require.Empty(t, s.Shape())
				want := tensor.Full(tensor.CPU(), dt, 1/float64(n)).Item()
				require.Equal(t, want, s.Item())

				g := tensor.Arange(dev, dt, 0, 12).Reshape(3, 4)
				h := g.Clone()
				h.ScaleInPlace(1 / float64(n))
				require.Equal(t, h.Float64s(), tensor.Mul(g, s).Float64s())
			}
			none := tensor.FromInt32s(dev, []int32{-100, -100}, 2)
			require.Zero(t, tensor.MeanScale(none, -100, tensor.Float32).Item())

			x := tensor.Zeros(dev, tensor.Float32, 3, 4)
			require.ErrorIs(t, tensor.Try(func() { tensor.MeanScale(targets, -100, tensor.BFloat16) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.MeanScale(x, -100, tensor.Float32) }), tensor.ErrDType)
		})
	})
}
