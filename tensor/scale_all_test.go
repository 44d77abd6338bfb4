package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestScaleAll: ScaleAll gives each tensor ScaleInPlace's bits (one
// rounding of v times alpha rounded to the dtype), float32 in one pass and
// float64 on its own, skipping nils and empty tensors; bad tensors are
// named errors.
func TestScaleAll(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(3, 4))
			ts := []*tensor.Tensor{
				tensor.RandN(dev, tensor.Float32, rng, 1, 300, 7),
				nil,
				tensor.RandN(dev, tensor.Float64, rng, 1, 1001),
				tensor.Zeros(dev, tensor.Float32, 0),
				tensor.RandN(dev, tensor.Float32, rng, 1e30, 70001),
				tensor.FromFloat32s(dev, []float32{float32(math.Inf(1)), float32(math.NaN()), -0, 1e-45}, 4),
			}
			const alpha = 0.123456789
			var want [][]float64
			for _, x := range ts {
				if x == nil {
					want = append(want, nil)
					continue
				}
				c := x.Clone()
				c.ScaleInPlace(alpha)
				want = append(want, c.Float64s())
			}
			tensor.ScaleAll(ts, alpha)
			for i, x := range ts {
				if x == nil {
					continue
				}
				got := x.Float64s()
				require.Len(t, got, len(want[i]))
				for j := range got {
					require.Equal(t, math.Float64bits(want[i][j]), math.Float64bits(got[j]), "tensor %d element %d: %v, want %v", i, j, got[j], want[i][j])
				}
			}
			tensor.ScaleAll(nil, 2)

			x := tensor.RandN(dev, tensor.Float32, rng, 1, 3, 4)
			rel := tensor.Zeros(dev, tensor.Float32, 2)
			rel.Release()
			for name, bad := range map[string][]*tensor.Tensor{
				"strided":  {x.T()},
				"released": {rel},
				"int32":    {tensor.FromInt32s(dev, []int32{1}, 1)},
			} {
				err := tensor.Try(func() { tensor.ScaleAll(bad, 2) })
				require.Error(t, err, name)
				require.ErrorContains(t, err, "ScaleAll", name)
			}
		})
	})
}
