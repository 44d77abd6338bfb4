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
