package cpukern

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Grain sizes, in elements, below which a kernel stays on the calling
// goroutine. Handing work to another goroutine costs roughly 1-5 µs
// (wake an idle P, run, signal back), so each worker must get tens of
// microseconds of work for the split to pay:
//
//	grainMem   memory-bound loops (copy, add, scale): ~0.2-0.5 ns/element
//	grainRow   row kernels (softmax, layernorm, cross-entropy): ~1-3 ns/element
//	grainMath  scalar transcendental ops (tanh, log, dropout): ~1-5 ns/element
const (
	grainMem  = 1 << 16
	grainRow  = 1 << 13
	grainMath = 1 << 13
)

// ParallelFor calls fn over [0, n) split into contiguous ranges, one per
// worker, and returns when all have finished. It uses
// min(runtime.GOMAXPROCS(0), n/grain) workers, so every worker gets at
// least grain iterations; with one worker it calls fn(0, n) on the calling
// goroutine and starts none. The caller's range is always the first one,
// and ranges differ in size by at most one iteration. fn must be safe to
// call concurrently on disjoint ranges.
func ParallelFor(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	workers := 1
	if n >= 2*grain {
		workers = min(runtime.GOMAXPROCS(0), n/grain)
	}
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		lo, hi := w*n/workers, (w+1)*n/workers
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	fn(0, n/workers)
	wg.Wait()
}

// serial reports whether n iterations of the given grain would run on one
// worker anyway. Kernels test it before building the closure they hand to
// ParallelFor, so small calls allocate nothing and start no goroutine.
func serial(n, grain int) bool {
	return n < 2*grain || runtime.GOMAXPROCS(0) == 1
}

// forChunks splits [0, n) into fixed chunks of size chunk (the last may be
// shorter) and calls fn(c, lo, hi) once per chunk, c being the chunk index.
// Workers claim chunks dynamically, but the chunk boundaries depend only
// on n and chunk, never on the number of workers: reductions that keep one
// partial per chunk and combine the partials in chunk order give
// bit-identical results on every machine and at every GOMAXPROCS.
func forChunks(n, chunk int, fn func(c, lo, hi int)) {
	chunks := (n + chunk - 1) / chunk
	workers := min(runtime.GOMAXPROCS(0), chunks)
	if workers <= 1 {
		for c := 0; c < chunks; c++ {
			fn(c, c*chunk, min(n, (c+1)*chunk))
		}
		return
	}
	var next atomic.Int64
	run := func() {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			fn(c, c*chunk, min(n, (c+1)*chunk))
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
}

// scratchPool recycles the float64 buffers that hold per-chunk partial
// sums, so the parallel reductions allocate nothing in steady state.
var scratchPool sync.Pool

// getScratch returns a zeroed float64 buffer of length n; give it back
// with putScratch.
func getScratch(n int) *[]float64 {
	p, _ := scratchPool.Get().(*[]float64)
	if p == nil {
		p = new([]float64)
	}
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	clear(*p)
	return p
}

func putScratch(p *[]float64) { scratchPool.Put(p) }
