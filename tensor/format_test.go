package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory/memtest"
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

// String of a broadcast view far too long to copy prints its shown values
// only: formatAxis visited every index of an axis to skip the elided
// ones, so a tensor expanded to 2^60 elements never printed.
func TestStringOfAHugeBroadcastView(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat32s(cpu, []float32{1, 2}, 2, 1)
		e := x.Expand(2, 1<<59)
		require.Equal(t, "Tensor(float32 [2 576460752303423488] on cpu,\n[[1, 1, 1, ..., 1, 1, 1],\n [2, 2, 2, ..., 2, 2, 2]])", e.String())
		v := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 8, 2)
		require.Equal(t, "Tensor(float32 [8 2] on cpu,\n[[1, 2],\n [3, 4],\n [5, 6],\n ...,\n [11, 12],\n [13, 14],\n [15, 16]])", v.String())
	})
}

// String that runs out of memory partway (fmt prints the String method's
// panic) leaves no tensor behind: the copy of the shown values was not
// released when reading it to the host failed, so it stayed allocated,
// outside any scope, until the garbage collector's safety net found it.
func TestStringOutOfMemoryLeaksNothing(t *testing.T) {
	x := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, 2, 7)
	tensor.Keep(x)
	defer x.Release()
	m := cpu.Memory()
	for n := int64(1); ; n++ {
		before := memtest.Settled(m)
		m.FailAllocation(n)
		s := fmt.Sprint(x)
		if m.FailAllocation(0) == 0 { // String made fewer than n allocations
			require.Equal(t, "Tensor(float32 [2 7] on cpu,\n[[1, 2, 3, ..., 5, 6, 7],\n [8, 9, 10, ..., 12, 13, 14]])", s)
			require.Greater(t, n, int64(2))
			return
		}
		require.Contains(t, s, "injected failure", "allocation %d", n)
		require.Equal(t, before, m.InUse(), "bytes in use after String's allocation %d failed", n)
	}
}
