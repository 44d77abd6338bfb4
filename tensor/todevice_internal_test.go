package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestCopyThroughHostChunks copies tensors between two CPU tensors
// through copyThroughHost's bounded buffer (ToDevice's path between two
// GPUs) with chunks smaller than the tensor, sizes that do not divide
// into them, and every element size: the bytes arrive unchanged.
func TestCopyThroughHostChunks(t *testing.T) {
	defer func(c int) { toDeviceChunk = c }(toDeviceChunk)
	cpu := CPU()
	for _, dt := range []DType{Float16, Float32, Float64, Int32} {
		for _, chunk := range []int{1, 6, 40, 1 << 20} {
			for _, n := range []int{0, 1, 7, 33, 257} {
				toDeviceChunk = chunk
				src := Arange(cpu, dt, 3, n)
				out, err := New(cpu, dt, memory.RoleOther, n)
				require.NoError(t, err)
				copyThroughHost(out, src)
				require.Equal(t, src.RawBytes(), out.RawBytes(), "%v, %d elements, chunks of %d bytes", dt, n, chunk)
				src.Release()
				out.Release()
			}
		}
	}
}
