package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// String prints integer tensors as integers, every digit kept (%.4g made
// 123456 read 1.235e+05), and float tensors to 4 significant digits.
func TestStringPrintsIntegersWhole(t *testing.T) {
	tensor.WithScope(func() {
		ids := tensor.FromInt32s(cpu, []int32{123456, -7, 2147483647, -2147483648}, 2, 2)
		require.Equal(t, "Tensor(int32 [2 2] on cpu,\n[[123456, -7],\n [2147483647, -2147483648]])", ids.String())
		x := tensor.FromFloat64s(cpu, []float64{123456, 0.5})
		require.Equal(t, "Tensor(float64 [2] on cpu,\n[1.235e+05, 0.5])", x.String())
	})
}
