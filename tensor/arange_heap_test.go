package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestArangeInt32OnCPUNeedsNoGoBuffer: Arange of int32 on the CPU writes
// straight into memory the device's manager counts (a host budget sees
// it), as the float dtypes do, not into a Go slice of int32 the size of
// the tensor beside it. Before, it built that slice: the values' bytes
// twice, half of them outside the budget.
func TestArangeInt32OnCPUNeedsNoGoBuffer(t *testing.T) {
	const n = 1 << 20 // 4 MiB of int32
	tensor.WithScope(func() {
		var x *tensor.Tensor
		heap := heapBytes(func() { x = tensor.Arange(tensor.CPU(), tensor.Int32, -3, n) })
		require.Less(t, heap, uint64(n), "Go heap bytes allocated")
		ids := x.Int32s()
		require.Equal(t, []int32{-3, -2, -1, 0}, ids[:4])
		require.Equal(t, int32(n-4), ids[n-1])
	})
}
