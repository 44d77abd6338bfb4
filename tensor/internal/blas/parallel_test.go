package blas

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParallelDoCoversEachIndexOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 3, 8} {
		for _, n := range []int{0, 1, 2, 5, 100} {
			counts := make([]atomic.Int32, n)
			parallelDo(workers, n, func(i int) { counts[i].Add(1) })
			for i := range counts {
				require.Equal(t, int32(1), counts[i].Load(), "workers=%d n=%d index %d", workers, n, i)
			}
		}
	}
}

func TestParallelDoRepanicsOnCaller(t *testing.T) {
	var ran atomic.Int32
	require.PanicsWithValue(t, "piece 7 failed", func() {
		parallelDo(3, 50, func(i int) {
			ran.Add(1)
			time.Sleep(time.Millisecond)
			if i == 7 {
				panic("piece 7 failed")
			}
		})
	})
	require.Less(t, ran.Load(), int32(50), "the workers kept going after the panic")
}
