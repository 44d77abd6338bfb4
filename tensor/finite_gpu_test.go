package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestGPUHasNaNAndAllFinite: HasNaN and AllFinite on a GPU, whose
// reductions must carry a NaN through (a max-style reduction would drop
// it) and tell it from an infinity, in every float dtype.
func TestGPUHasNaNAndAllFinite(t *testing.T) {
	dev := cudaOrSkip(t)
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16} {
			big := make([]float64, 1<<16) // past one block of the reduction
			for i := range big {
				big[i] = float64(i%7) - 3
			}
			nan := append([]float64(nil), big...)
			nan[len(nan)-5] = math.NaN()
			inf := append([]float64(nil), big...)
			inf[3] = math.Inf(-1)
			x := tensor.FromFloats(dev, dt, big, len(big))
			require.False(t, tensor.HasNaN(x), "%v", dt)
			require.True(t, tensor.AllFinite(x), "%v", dt)
			x = tensor.FromFloats(dev, dt, nan, len(nan))
			require.True(t, tensor.HasNaN(x), "%v", dt)
			require.False(t, tensor.AllFinite(x), "%v", dt)
			x = tensor.FromFloats(dev, dt, inf, len(inf))
			require.False(t, tensor.HasNaN(x), "%v", dt)
			require.False(t, tensor.AllFinite(x), "%v", dt)
		}
	})
}
