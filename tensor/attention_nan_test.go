package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestFusedAttentionPropagatesNaNOfV: a NaN in v reaches every output row
// that attends its key, even where that key's weight is 0 because dropout
// dropped it or exp underflowed, as softmax(...) @ v does in PyTorch
// (0 x NaN is NaN; torch 1.13's math attention and the plain path here).
// The CPU's fused attention skipped zero weights, so a NaN in the values
// vanished from the rows whose weight for it was dropped.
func TestFusedAttentionPropagatesNaNOfV(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			const T = 6
			nan := math.NaN()
			v := []float64{nan, 1}
			for i := 1; i < T; i++ {
				v = append(v, float64(i), -float64(i))
			}
			mk := func(x []float64) *tensor.Tensor { return c.FromFloat64s(dev, x).To(tensor.Float32).Reshape(1, T, 2) }
			check := func(name string, out *tensor.Tensor) {
				got := out.Float64s()
				for r := range T {
					require.True(t, math.IsNaN(got[2*r]), "%s: row %d, dim 0: %v", name, r, got[2*r])
					require.False(t, math.IsNaN(got[2*r+1]), "%s: row %d, dim 1: %v", name, r, got[2*r+1])
				}
			}
			// Dropout drops most of the weights of key 0.
			small := make([]float64, 2*T)
			for i := range small {
				small[i] = 0.1 * float64(i%5)
			}
			out, _ := tensor.FusedCausalAttention(mk(small), mk(small), mk(v), 0.9, 5, 0)
			check("dropout 0.9", out)
			// Key 0's score underflows exp for every row after the first.
			q, k := make([]float64, 2*T), make([]float64, 2*T)
			k[0] = -100
			for r := 1; r < T; r++ {
				q[2*r] = 100
			}
			out, _ = tensor.FusedCausalAttention(mk(q), mk(k), mk(v), 0, 0, 0)
			check("underflow", out)
		})
	})
}
