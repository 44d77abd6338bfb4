package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestDropoutMultipliesByItsMask: a dropped element is multiplied by 0,
// as PyTorch's dropout multiplies by its mask (torch 1.13:
// F.dropout(torch.tensor([nan, inf, -2.]), 0.5) gives nan, nan and -0
// where it drops): a NaN or infinite input shows in the output whichever
// elements are dropped, and a dropped negative is -0. Dropout cleared a
// dropped element's bits (+0), so a NaN in the activations vanished with
// probability p. Kept elements are x * (1/(1-p)) as before; the backward
// pass is the same call, so it propagates a NaN gradient the same way.
func TestDropoutMultipliesByItsMask(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			c := tensor.NewCtx()
			c.WithScope(func() {
				const n, p = 64, 0.5
				ones := make([]float64, n)
				for i := range ones {
					ones[i] = 1
				}
				mask := tensor.Dropout(c.FromFloat64s(dev, ones).To(dt), p, 7, 3).Float64s()
				src := make([]float64, 0, n)
				for i := range n {
					src = append(src, []float64{math.NaN(), math.Inf(1), math.Inf(-1), -2, 0, 3}[i%6])
				}
				got := tensor.Dropout(c.FromFloat64s(dev, src).To(dt), p, 7, 3).Float64s()
				dropped, kept := 0, 0
				for i, m := range mask {
					want := src[i] * 2 * (m / 2) // m/2 is the mask: 0 or 1
					switch {
					case math.IsNaN(want):
						require.True(t, math.IsNaN(got[i]), "%v element %d: %v with mask %v gave %v", dt, i, src[i], m/2, got[i])
					default:
						require.Equal(t, want, got[i], "%v element %d: %v with mask %v", dt, i, src[i], m/2)
						require.Equal(t, math.Signbit(want), math.Signbit(got[i]), "%v element %d: %v with mask %v gave %v", dt, i, src[i], m/2, got[i])
					}
					if m == 0 {
						dropped++
					} else {
						kept++
					}
				}
				require.True(t, dropped > 10 && kept > 10, "dropped %d kept %d", dropped, kept)
			})
		}
	})
}

// TestDropoutDroppedOverflowIsZero: a dropped finite element is 0 even
// where its scaled value overflows, as PyTorch multiplies by the mask
// already scaled (torch 1.13: F.dropout(torch.full((16,), 3e38), 0.5)
// gives inf where it keeps and 0 where it drops). Dropout scaled first
// and then multiplied by 0, so a dropped 3e38 was inf * 0 = NaN.
func TestDropoutDroppedOverflowIsZero(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			const n, p = 64, 0.5
			ones, big := make([]float32, n), make([]float32, n)
			for i := range n {
				ones[i], big[i] = 1, 3e38
				if i%2 == 1 {
					big[i] = -3e38
				}
			}
			mask := tensor.Dropout(c.FromFloat32s(dev, ones, n), p, 7, 3).Float32s()
			got := tensor.Dropout(c.FromFloat32s(dev, big, n), p, 7, 3).Float32s()
			dropped := 0
			for i, m := range mask {
				if m != 0 {
					require.True(t, math.IsInf(float64(got[i]), int(math.Copysign(1, float64(big[i])))), "kept element %d: %v gave %v", i, big[i], got[i])
					continue
				}
				dropped++
				require.Equal(t, float32(0), got[i], "dropped element %d: %v", i, big[i])
				require.Equal(t, math.Signbit(float64(big[i])), math.Signbit(float64(got[i])), "dropped element %d: %v gave %v", i, big[i], got[i])
			}
			require.True(t, dropped > 10, "dropped %d", dropped)
		})
	})
}
