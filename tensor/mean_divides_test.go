package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestMeanDividesBySize: Mean is the sum divided by the element count,
// as PyTorch's mean (at::sum(...).div_(n)), not the sum times a rounded
// 1/n, which is off by an ulp for many counts: the mean of seven 7s was
// 7.0000005 in float32. The golden values are PyTorch 1.13's.
func TestMeanDividesBySize(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		f32 := tensor.Float32
		// torch.full((7,), 7.).mean().item()
		require.Equal(t, []float32{7}, tensor.Mean(tensor.Full(cpu, f32, 7, 7), false).Float32s())
		// torch.full((2, 7), 7.).mean(1).tolist()
		require.Equal(t, []float32{7, 7}, tensor.Mean(tensor.Full(cpu, f32, 7, 2, 7), false, 1).Float32s())
		// torch.full((7, 2), 7.).mean(0, keepdim=True).tolist()
		require.Equal(t, []float32{7, 7}, tensor.Mean(tensor.Full(cpu, f32, 7, 7, 2), true, 0).Float32s())
		// torch.full((3,), 0.1).mean().item()
		require.Equal(t, []float64{0.10000000149011612}, tensor.Mean(tensor.Full(cpu, f32, 0.1, 3), false).Float64s())
		// torch.full((3,), 0.1, dtype=torch.float64).mean().item()
		require.Equal(t, []float64{0.10000000000000002}, tensor.Mean(tensor.Full(cpu, tensor.Float64, 0.1, 3), false).Float64s())
		// An empty axis still gives NaN (0/0), as torch.zeros(2, 0).mean(1).
		m := tensor.Mean(tensor.Zeros(cpu, f32, 2, 0), false, 1).Float64s()
		require.Len(t, m, 2)
		require.True(t, math.IsNaN(m[0]) && math.IsNaN(m[1]), "%v", m)
	})
}
