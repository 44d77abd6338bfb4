package memtest

import (
	"fmt"
	"sync"

	"github.com/strata-ml/strata/memory"
)

// FaultBackend wraps a backend with a budget of live bytes and injected
// failures, and records every region it hands out. Frees of regions it did
// not hand out, or already took back, fail with memory.ErrDoubleFree. It is
// safe for concurrent use.
type FaultBackend struct {
	up memory.Backend

	mu        sync.Mutex
	budget    int64
	failNext  int
	failIn    int // the failIn-th Alloc from now starts failCount failures (FailAt)
	failCount int
	live      map[uintptr]int64
	liveBytes int64
	peakBytes int64
	allocs    int
	frees     int
}

// NewFaultBackend wraps up. budget is the most bytes that may be live at
// once, 0 for no budget of its own.
func NewFaultBackend(up memory.Backend, budget int64) *FaultBackend {
	return &FaultBackend{up: up, budget: budget, live: map[uintptr]int64{}}
}

func (f *FaultBackend) Name() string      { return "fault(" + f.up.Name() + ")" }
func (f *FaultBackend) Tier() memory.Tier { return f.up.Tier() }

// Alloc fails with memory.ErrOutOfMemory while failures are injected or when
// the budget would be passed; otherwise it asks the wrapped backend.
func (f *FaultBackend) Alloc(size int64) (memory.Region, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if size <= 0 {
		return memory.Region{}, fmt.Errorf("memtest: %s: cannot allocate %d bytes: %w", f.Name(), size, memory.ErrInvalidArgument)
	}
	if f.failIn > 0 {
		if f.failIn--; f.failIn == 0 {
			f.failNext = f.failCount
		}
	}
	if f.failNext != 0 {
		if f.failNext > 0 {
			f.failNext--
		}
		return memory.Region{}, fmt.Errorf("memtest: %s: allocating %d bytes: %w: %w", f.Name(), size, memory.ErrInjected, memory.ErrOutOfMemory)
	}
	if f.budget > 0 && size > f.budget-f.liveBytes {
		return memory.Region{}, fmt.Errorf("memtest: %s: %d bytes live, budget %d, cannot allocate %d more: %w",
			f.Name(), f.liveBytes, f.budget, size, memory.ErrOutOfMemory)
	}
	r, err := f.up.Alloc(size)
	if err != nil {
		return r, err
	}
	f.live[r.Addr] = r.Size
	f.liveBytes += r.Size
	f.peakBytes = max(f.peakBytes, f.liveBytes)
	f.allocs++
	return r, nil
}

// Free gives r back to the wrapped backend if it is live here.
func (f *FaultBackend) Free(r memory.Region) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	size, ok := f.live[r.Addr]
	if !ok || size != r.Size {
		return fmt.Errorf("memtest: %s: free of region at %#x (%d bytes) that is not live: %w", f.Name(), r.Addr, r.Size, memory.ErrDoubleFree)
	}
	if err := f.up.Free(r); err != nil {
		return err
	}
	delete(f.live, r.Addr)
	f.liveBytes -= size
	f.frees++
	return nil
}

// Info reports the budget when there is one, else the wrapped backend's.
// A budget lowered below the live bytes (SetBudget) has none free, not a
// negative count.
func (f *FaultBackend) Info() (free, total int64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.budget > 0 {
		return max(0, f.budget-f.liveBytes), f.budget, true
	}
	return f.up.Info()
}

// FailNext makes the next n allocations fail with memory.ErrOutOfMemory
// (n < 0: every one until FailNext(0)).
func (f *FaultBackend) FailNext(n int) {
	f.mu.Lock()
	f.failNext, f.failIn = n, 0
	f.mu.Unlock()
}

// FailAt makes the n-th allocation from now (1: the next) and the
// count-1 after it fail with memory.ErrOutOfMemory (count < 0: every one
// from the n-th on, until FailNext(0)): a backend that runs out in the
// middle of a workload. count 1 is a transient failure, which a pool
// survives by releasing its cache and retrying.
func (f *FaultBackend) FailAt(n, count int) {
	f.mu.Lock()
	f.failNext, f.failIn, f.failCount = 0, n, count
	if n <= 0 {
		f.failIn = 0
	}
	f.mu.Unlock()
}

// SetBudget changes the budget (0 for none); live regions stay.
func (f *FaultBackend) SetBudget(budget int64) {
	f.mu.Lock()
	f.budget = budget
	f.mu.Unlock()
}

// Live returns the number and bytes of regions handed out and not freed.
func (f *FaultBackend) Live() (regions int, bytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live), f.liveBytes
}

// PeakBytes returns the most bytes that were live at once.
func (f *FaultBackend) PeakBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peakBytes
}

// Calls returns the successful Alloc and Free calls.
func (f *FaultBackend) Calls() (allocs, frees int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allocs, f.frees
}
