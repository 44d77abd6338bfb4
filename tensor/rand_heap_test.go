package tensor_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestRandOnCPUNeedsNoGoBuffer: RandN and RandUniform on the CPU draw
// straight into memory the device's manager counts (a host budget sees
// it), not into a Go slice of float64 the size of the tensor beside it;
// the values are the same draws in the same order.
func TestRandOnCPUNeedsNoGoBuffer(t *testing.T) {
	const n = 1 << 20 // 8 MiB of float64 draws
	cpu := tensor.CPU()
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.BFloat16} {
		tensor.WithScope(func() {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			x := tensor.RandN(cpu, dt, rand.New(rand.NewPCG(7, 7)), 0.5, n)
			u := tensor.RandUniform(cpu, dt, rand.New(rand.NewPCG(8, 8)), -1, 1, n)
			runtime.ReadMemStats(&after)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(n), "%v: Go heap bytes allocated", dt)

			rng := rand.New(rand.NewPCG(7, 7))
			want := make([]float64, 5)
			for i := range want {
				want[i] = rng.NormFloat64() * 0.5
			}
			ref := tensor.FromFloat64s(cpu, want, 5).To(dt)
			require.Equal(t, ref.Float64s(), x.Narrow(0, 0, 5).Contiguous().Float64s(), "%v: the first draws", dt)
			require.NotZero(t, u.Float64s()[n-1])
		})
	}
}
