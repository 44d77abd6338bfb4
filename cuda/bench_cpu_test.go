//go:build linux

package cuda

import (
	"runtime"
	"syscall"
	"testing"
)

// CPU-side costs behind the context strategy (doc.go, "Threads"),
// measured against libc so they run anywhere.

var sinkUintptr uintptr

// BenchmarkPuregoCall: one C call through a pooled frame, the floor of
// every driver call.
func BenchmarkPuregoCall(b *testing.B) {
	labs := libcSym(b, "labs")
	b.ReportAllocs()
	for b.Loop() {
		f := getFrame()
		sinkUintptr += f.call(labs.addr, 1)
		f.release()
	}
}

// BenchmarkPuregoCallGoPointers: the allocating path used for calls that
// pass Go memory.
func BenchmarkPuregoCallGoPointers(b *testing.B) {
	labs := libcSym(b, "labs")
	b.ReportAllocs()
	for b.Loop() {
		sinkUintptr += ccall(labs.addr, 1)
	}
}

// BenchmarkEntry: the whole entry path (lock, call, unlock) against a
// fake driver, optimistic and setting the context every call.
func BenchmarkEntry(b *testing.B) {
	c := fakeContext(b)
	run := func(b *testing.B) {
		b.ReportAllocs()
		before := DriverCalls()
		for b.Loop() {
			f := getFrame()
			c.invoke(f, c.drv.eventQuery, 0)
			f.release()
		}
		reportCalls(b, before)
	}
	b.Run("optimistic", run)
	b.Run("setEveryCall", func(b *testing.B) {
		forceSetCurrent.Store(true)
		defer forceSetCurrent.Store(false)
		run(b)
	})
}

// BenchmarkLaunchHostSide: argument building, validation and the call of
// a launch, against a fake driver.
func BenchmarkLaunchHostSide(b *testing.B) {
	c := fakeContext(b)
	fn := fakeFunction(c)
	a, err := NewArgs()
	if err != nil {
		b.Fatal(err)
	}
	defer a.Free()
	b.ReportAllocs()
	before := DriverCalls()
	for b.Loop() {
		if err := c.LaunchKernelArgs(fn, [3]uint32{64, 1, 1}, [3]uint32{256, 1, 1}, 0, nil,
			a.Reset().Ptr(1).Ptr(2).Ptr(3).Int32(4)); err != nil {
			b.Fatal(err)
		}
	}
	reportCalls(b, before)
}

// BenchmarkGettid: asking the kernel which thread we are on, the basis of
// a per-thread "context already current" cache. It costs more than the
// purego call it would save.
func BenchmarkGettid(b *testing.B) {
	for b.Loop() {
		sinkUintptr += uintptr(syscall.Gettid())
	}
}

// BenchmarkFunnelRoundTrip: handing a call to one goroutine locked to its
// thread and waiting for the answer.
func BenchmarkFunnelRoundTrip(b *testing.B) {
	req, resp := make(chan uintptr), make(chan uintptr)
	go func() {
		runtime.LockOSThread()
		for v := range req {
			resp <- v + 1
		}
	}()
	defer close(req)
	for b.Loop() {
		req <- 1
		sinkUintptr += <-resp
	}
}

func BenchmarkLockUnlockOSThread(b *testing.B) {
	for b.Loop() {
		runtime.LockOSThread()
		runtime.UnlockOSThread()
	}
}
