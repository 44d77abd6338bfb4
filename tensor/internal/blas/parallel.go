package blas

import (
	"sync"
	"sync/atomic"
)

// parallelDo calls body(i) for every i in [0, n) on up to workers
// goroutines, the caller's included, and returns when all calls have.
// Indices are handed out one at a time from a shared counter, so the
// caller starts at once and a helper that wakes late (tens of µs on a
// virtual machine) or shares its core with other work simply takes fewer.
// A panic in body is re-raised on the caller's goroutine once every
// worker has stopped.
func parallelDo(workers, n int, body func(i int)) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := range n {
			body(i)
		}
		return
	}
	t := &team{n: int64(n), body: body}
	t.wg.Add(workers)
	for range workers - 1 {
		go t.work()
	}
	t.work()
	t.wg.Wait()
	if f := t.failure.Load(); f != nil {
		panic(f.value)
	}
}

type team struct {
	next    atomic.Int64
	n       int64
	body    func(int)
	wg      sync.WaitGroup
	failure atomic.Pointer[failure]
}

type failure struct{ value any }

func (t *team) work() {
	defer t.wg.Done()
	defer func() {
		if r := recover(); r != nil {
			t.failure.CompareAndSwap(nil, &failure{r})
			t.next.Store(t.n) // the others stop after their current piece
		}
	}()
	for {
		i := t.next.Add(1) - 1
		if i >= t.n {
			return
		}
		t.body(int(i))
	}
}
