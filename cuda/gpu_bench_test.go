package cuda

import (
	"runtime"
	"testing"
	"unsafe"
)

// GPU benchmarks; they skip without a GPU. Run on the GPU machine with
//
//	cd cuda && ../.gpu/cuda.test -test.run '^$' -test.bench GPU -test.benchmem
//
// Each reports driver calls per operation ("calls/op") besides time.

var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

func reportCalls(b *testing.B, before uint64) {
	b.ReportMetric(float64(DriverCalls()-before)/float64(b.N), "calls/op")
}

func BenchmarkGPUMemAllocFree(b *testing.B) {
	c := gpuContext(b)
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			before := DriverCalls()
			for b.Loop() {
				p, err := c.MemAlloc(sz.n)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.MemFree(p); err != nil {
					b.Fatal(err)
				}
			}
			reportCalls(b, before)
		})
	}
}

func BenchmarkGPUMemAllocFreeAsync(b *testing.B) {
	c := gpuContext(b)
	s, err := c.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	for _, threshold := range []struct {
		name  string
		bytes uint64
	}{{"release0", 0}, {"keep1GiB", 1 << 30}} {
		if err := c.SetMemPoolReleaseThreshold(threshold.bytes); err != nil {
			b.Fatal(err)
		}
		for _, sz := range benchSizes {
			b.Run(threshold.name+"/"+sz.name, func(b *testing.B) {
				before := DriverCalls()
				for b.Loop() {
					p, err := c.MemAllocAsync(sz.n, s)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.MemFreeAsync(p, s); err != nil {
						b.Fatal(err)
					}
				}
				reportCalls(b, before)
				b.StopTimer()
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
	_ = c.SetMemPoolReleaseThreshold(0)
}

// BenchmarkGPULaunch times the host side of launching an empty kernel
// (synchronising every 512 launches so the queue never fills and blocks).
func BenchmarkGPULaunch(b *testing.B) {
	c := gpuContext(b)
	m, err := c.ModuleLoadData([]byte(ptxVectorAdd))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Unload()
	fn, err := m.Function("vadd")
	if err != nil {
		b.Fatal(err)
	}
	s, err := c.NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	p, err := c.MemAlloc(1024)
	if err != nil {
		b.Fatal(err)
	}
	defer c.MemFree(p)
	args, err := NewArgs()
	if err != nil {
		b.Fatal(err)
	}
	defer args.Free()
	one, block := [3]uint32{1, 1, 1}, [3]uint32{256, 1, 1}
	loop := func(b *testing.B, launch func() error) {
		b.ReportAllocs()
		before := DriverCalls()
		i := 0
		for b.Loop() {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
			if i++; i%512 == 0 {
				b.StopTimer()
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		}
		reportCalls(b, before)
		b.StopTimer()
		_ = s.Synchronize()
	}
	withArgs := func() error {
		return c.LaunchKernelArgs(fn, one, block, 0, s, args.Reset().Ptr(p).Ptr(p).Ptr(p).Int32(0))
	}
	b.Run("Args", func(b *testing.B) { loop(b, withArgs) })
	b.Run("any", func(b *testing.B) {
		loop(b, func() error { return c.LaunchKernel(fn, one, block, 0, s, p, p, p, int32(0)) })
	})
	b.Run("Args/setEveryCall", func(b *testing.B) {
		forceSetCurrent.Store(true)
		defer forceSetCurrent.Store(false)
		loop(b, withArgs)
	})
	b.Run("Args/lockedThread", func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		loop(b, withArgs)
	})
}

// BenchmarkGPUEntry compares the ways of getting the context current
// around one cheap driver call (cuEventQuery of a completed event).
func BenchmarkGPUEntry(b *testing.B) {
	c := gpuContext(b)
	e, err := c.NewEvent(EventDisableTiming)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Destroy()
	if err := e.Record(nil); err != nil {
		b.Fatal(err)
	}
	if err := e.Synchronize(); err != nil {
		b.Fatal(err)
	}
	query := func(b *testing.B) {
		if _, err := e.Query(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("raw", func(b *testing.B) { // the bare purego call, no entry logic
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.makeCurrent(); err != nil {
			b.Fatal(err)
		}
		f := getFrame()
		defer f.release()
		for b.Loop() {
			f.call(c.drv.eventQuery.addr, e.h)
		}
	})
	b.Run("optimistic", func(b *testing.B) {
		before := DriverCalls()
		for b.Loop() {
			query(b)
		}
		reportCalls(b, before)
	})
	b.Run("setEveryCall", func(b *testing.B) {
		forceSetCurrent.Store(true)
		defer forceSetCurrent.Store(false)
		before := DriverCalls()
		for b.Loop() {
			query(b)
		}
		reportCalls(b, before)
	})
	b.Run("funnel", func(b *testing.B) { // one locked goroutine runs every call
		req := make(chan struct{})
		done := make(chan error)
		go func() {
			runtime.LockOSThread()
			for range req {
				_, err := e.Query()
				done <- err
			}
		}()
		defer close(req)
		for b.Loop() {
			req <- struct{}{}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ctxGetCurrent", func(b *testing.B) { // cost of asking instead of setting
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		f := getFrame()
		defer f.release()
		for b.Loop() {
			f.call(c.drv.ctxGetCurrent.addr, f.outAddr(0))
		}
	})
}

func BenchmarkGPUMemcpyHtoD(b *testing.B) {
	c := gpuContext(b)
	const n = 64 << 20
	d, err := c.MemAlloc(n)
	if err != nil {
		b.Fatal(err)
	}
	defer c.MemFree(d)
	hp, _, err := c.MemHostAlloc(n, HostAllocPortable)
	if err != nil {
		b.Fatal(err)
	}
	defer c.MemFreeHost(hp)
	pageable := make([]byte, n)
	b.Run("pinned", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			if err := c.MemcpyHtoDPtr(d, hp, n); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pageable", func(b *testing.B) {
		b.SetBytes(n)
		for b.Loop() {
			if err := c.MemcpyHtoDPtr(d, unsafe.Pointer(&pageable[0]), n); err != nil {
				b.Fatal(err)
			}
		}
	})
}
