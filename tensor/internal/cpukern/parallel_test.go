package cpukern

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParallelForCoversRangeOnce(t *testing.T) {
	for _, procs := range []int{1, 2, 3, 8} {
		for _, c := range []struct{ n, grain int }{{0, 1}, {1, 1}, {5, 1}, {7, 3}, {100, 10}, {1000, 1}, {1000, 600}, {10, 0}} {
			withProcs(procs, func() {
				hits := make([]int32, c.n)
				var calls atomic.Int32
				var mu sync.Mutex
				var ranges [][2]int
				ParallelFor(c.n, c.grain, func(lo, hi int) {
					calls.Add(1)
					mu.Lock()
					ranges = append(ranges, [2]int{lo, hi})
					mu.Unlock()
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
				})
				for i, h := range hits {
					require.EqualValues(t, 1, h, "procs %d n %d grain %d: index %d visited %d times", procs, c.n, c.grain, i, h)
				}
				g := max(c.grain, 1)
				wantWorkers := 1
				if c.n >= 2*g {
					wantWorkers = min(procs, c.n/g)
				}
				if c.n == 0 {
					wantWorkers = 0
				}
				assert.EqualValues(t, wantWorkers, calls.Load(), "procs %d n %d grain %d", procs, c.n, c.grain)
				for _, r := range ranges {
					if wantWorkers > 1 {
						assert.GreaterOrEqual(t, r[1]-r[0], g, "range %v below grain %d", r, g)
					}
				}
			})
		}
	}
}

func TestParallelForSmallRunsOnCaller(t *testing.T) {
	// Below two grains the caller runs fn(0, n) itself, so a closure that
	// is not safe for concurrent use is fine there.
	var got [][2]int
	ParallelFor(19, 10, func(lo, hi int) { got = append(got, [2]int{lo, hi}) })
	assert.Equal(t, [][2]int{{0, 19}}, got)
}

func TestForChunksFixedBoundaries(t *testing.T) {
	for _, procs := range []int{1, 2, 5} {
		withProcs(procs, func() {
			const n, chunk = 1003, 100
			got := make([][2]int, (n+chunk-1)/chunk)
			forChunks(n, chunk, func(c, lo, hi int) { got[c] = [2]int{lo, hi} })
			for c, r := range got {
				require.Equal(t, [2]int{c * chunk, min(n, (c+1)*chunk)}, r, "procs %d chunk %d", procs, c)
			}
		})
	}
}

func TestScratchIsZeroed(t *testing.T) {
	p := getScratch(64)
	for i := range *p {
		(*p)[i] = 3
	}
	putScratch(p)
	q := getScratch(32)
	defer putScratch(q)
	require.Len(t, *q, 32)
	for _, v := range *q {
		require.Zero(t, v)
	}
}
