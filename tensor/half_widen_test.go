package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// Half gradients (bf16 and fp16) in gradient clipping's reductions:
// SumSquaresAll widens them to float32 a bounded group at a time (here 1
// KiB, so that every tensor is a group and a few share one) and gives the
// float64 reference's sum beside float32 and float64 tensors; ScaleAll
// gives each half tensor its float32 value times alpha rounded once to its
// dtype, which is within a half's rounding of the float64 product.
func TestHalfGradientsInClipping(t *testing.T) {
	defer tensor.SetHalfWidenGroup(1 << 10)()
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(5, 6))
			ts := []*tensor.Tensor{
				tensor.RandN(dev, tensor.Float32, rng, 1, 37, 5),
				tensor.RandN(dev, tensor.Float32, rng, 1, 300, 7).To(tensor.BFloat16),
				tensor.RandN(dev, tensor.Float64, rng, 2, 11),
				tensor.RandN(dev, tensor.Float32, rng, 0.5, 40).To(tensor.Float16),
				tensor.RandN(dev, tensor.Float32, rng, 3, 60).To(tensor.BFloat16),
				tensor.RandN(dev, tensor.Float32, rng, 1, 1000).To(tensor.BFloat16),
			}
			var want float64
			before := make([][]float64, len(ts))
			for i, x := range ts {
				before[i] = x.Float64s() // exact: every dtype widens exactly
				for _, v := range before[i] {
					want += v * v
				}
			}
			got := tensor.SumSquaresAll(ts)
			require.InEpsilon(t, want, got, 1e-5, "sum of squares")

			const alpha = 0.3
			var ref []*tensor.Tensor
			for _, x := range ts {
				if x.DType().IsHalf() {
					w := x.To(tensor.Float32)
					w.ScaleInPlace(alpha)
					ref = append(ref, w.To(x.DType()))
				} else {
					ref = append(ref, nil)
				}
			}
			tensor.ScaleAll(ts, alpha)
			for i, x := range ts {
				after := x.Float64s()
				tol := 1e-6
				if x.DType() == tensor.BFloat16 {
					tol = 1.0 / 256
				} else if x.DType() == tensor.Float16 {
					tol = 1.0 / 2048
				}
				for j, v := range after {
					exact := before[i][j] * alpha
					require.LessOrEqual(t, math.Abs(v-exact), tol*math.Abs(exact)+1e-30, "tensor %d (%v) element %d: %v, want about %v", i, x.DType(), j, v, exact)
				}
				if ref[i] != nil {
					require.Equal(t, ref[i].Float64s(), after, "tensor %d: the float32 product rounded once", i)
				}
			}
		})
	})
}
