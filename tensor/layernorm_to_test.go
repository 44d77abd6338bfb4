package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// LayerNormTo gives exactly LayerNorm's output cast to the half type, and
// the same statistics, on every device, with and without the affine
// parameters, for rows that fill a warp and rows that do not.
func TestLayerNormToMatchesLayerNormThenCast(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(12, 13))
			for _, cols := range []int{7, 64, 768} {
				x := tensor.RandN(dev, tensor.Float32, rng, 2, 5, 3, cols)
				w := tensor.RandN(dev, tensor.Float32, rng, 1, cols)
				b := tensor.RandN(dev, tensor.Float32, rng, 1, cols)
				for _, aff := range [][2]*tensor.Tensor{{w, b}, {nil, nil}, {w, nil}} {
					y, mean, rstd := tensor.LayerNorm(x, aff[0], aff[1], 1e-5)
					for _, half := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
						hy, hm, hr := tensor.LayerNormTo(x, aff[0], aff[1], 1e-5, half)
						require.Equal(t, half, hy.DType())
						require.Equal(t, tensor.Float32, hm.DType())
						require.Equal(t, y.To(half).Float64s(), hy.Float64s(), "%d columns to %v on %v", cols, half, dev)
						require.Equal(t, mean.Float64s(), hm.Float64s())
						require.Equal(t, rstd.Float64s(), hr.Float64s())
					}
				}
			}
			x := tensor.RandN(dev, tensor.Float32, rng, 1, 2, 4)
			require.ErrorIs(t, tensor.Try(func() { tensor.LayerNormTo(x, nil, nil, 1e-5, tensor.Int32) }), tensor.ErrDType)
			require.ErrorIs(t, tensor.Try(func() { tensor.LayerNormTo(x.To(tensor.Float64), nil, nil, 1e-5, tensor.BFloat16) }), tensor.ErrDType)
		})
	})
}
