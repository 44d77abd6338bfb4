package blas

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// backend is where products run: a system library, the package's own
// float32 kernel, or gonum. It is chosen once, on first use, and swapped
// only by tests (useBackend).
type backend struct {
	lib    *library     // nil for the fallbacks
	kernel *microKernel // float32 on the own GEMM with this kernel; nil otherwise
	reason string       // why a fallback, in one line; "" with a library

	s engine[float32]
	d engine[float64]
}

func libraryBackend(l *library) *backend {
	return &backend{
		lib: l,
		s:   engine[float32]{big: l.gemm32, small: gonumGemm32, split: true},
		d:   engine[float64]{big: l.gemm64, small: gonumGemm64, split: true},
	}
}

func gonumBackend(reason string) *backend {
	return &backend{
		reason: reason,
		s:      engine[float32]{big: gonumGemm32, small: gonumGemm32},
		d:      engine[float64]{big: gonumGemm64, small: gonumGemm64},
	}
}

// ownBackend runs float32 products on the package's own GEMM with kernel
// kr, split over goroutines as library calls are, and float64 on gonum.
func ownBackend(reason string, kr *microKernel) *backend {
	run := func(p problem[float32]) { ownGemm(p, kr) }
	return &backend{
		kernel: kr,
		reason: reason,
		s:      engine[float32]{big: run, small: gonumGemm32, split: true},
		d:      engine[float64]{big: gonumGemm64, small: gonumGemm64},
	}
}

// fallbackBackend is the backend without a library: the package's own
// float32 kernel where the CPU runs it, unless STRATA_BLAS=gonum asks for
// gonum; gonum otherwise.
func fallbackBackend(reason string) *backend {
	switch {
	case forcedGonum():
		return gonumBackend(reason)
	case !haveKernel:
		return gonumBackend(reason + "; " + noKernel)
	}
	return ownBackend(reason, bestKernel)
}

var (
	active     atomic.Pointer[backend]
	discovered = sync.OnceValue(func() *backend {
		l, reason := discover()
		if l == nil {
			return fallbackBackend(reason)
		}
		return libraryBackend(l)
	})
	threadSetting atomic.Int64 // 0: follow GOMAXPROCS
)

// current returns the backend in force, discovering it on first use.
func current() *backend {
	if b := active.Load(); b != nil {
		return b
	}
	active.CompareAndSwap(nil, discovered())
	return active.Load()
}

// useBackend makes b the backend in force and returns the one it
// replaced. Tests use it to run the same cases on every backend.
func useBackend(b *backend) *backend {
	old := current()
	active.Store(b)
	return old
}

// Backend describes, in one line, where products run: the library, its
// version and file, and the number of threads; or the fallback ("go" for
// the package's own float32 kernel, "gonum") and why no library is in
// use. It loads the library if that has not happened yet.
func Backend() string {
	b := current()
	if b.kernel != nil {
		return fmt.Sprintf("go (%s, float64 on gonum; %s), %d threads", b.kernel.name, b.reason, threads())
	}
	if b.lib == nil {
		return fmt.Sprintf("gonum (%s), %d threads", b.reason, threads())
	}
	return fmt.Sprintf("%s, %d threads", b.lib.describe(), threads())
}

// SetThreads sets how many threads (goroutines, the caller's included)
// share one product or one batch; n <= 0 restores the default,
// runtime.GOMAXPROCS(0) at the time of each call. The library's own
// thread pool stays at one thread whatever n is: the package does the
// splitting, so that the library never competes with Go code for cores
// (see the package documentation for the measurements). On the own
// kernel float32 products are split the same way; on gonum (float64
// without a library, or everything with STRATA_BLAS=gonum) a single large
// product uses gonum's own goroutines, as many as GOMAXPROCS, whatever n
// is. On the own kernel and on gonum, n changes the speed, never the
// bits of a result.
func SetThreads(n int) {
	threadSetting.Store(int64(max(n, 0)))
}

// threads is the number of workers a product or batch may use.
func threads() int {
	if n := threadSetting.Load(); n > 0 {
		return int(n)
	}
	return runtime.GOMAXPROCS(0)
}
