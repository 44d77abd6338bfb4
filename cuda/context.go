package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Context is a device's primary context: the one CUDA runtime users
// (PyTorch, cuBLAS) share, retained once per device and held for the rest
// of the process. Every method that needs the context current makes it
// current on the calling OS thread itself (see doc.go, "Threads"), so a
// Context may be used from any goroutine, concurrently.
type Context struct {
	dev   Device
	h     uintptr // CUcontext
	drv   *driver
	props Properties
}

var contexts struct {
	mu    sync.Mutex
	byDev map[Device]*Context
}

// liveContexts counts retained contexts. While it is 1 (one GPU in use),
// entry is optimistic: a thread keeps the context current once it has
// been made current there, so calls go straight to the driver and only a
// CUDA_ERROR_INVALID_CONTEXT answer costs a cuCtxSetCurrent and a retry.
// With two or more, a thread may hold the other device's context, which
// the driver would use without complaint, so every entry sets it.
var liveContexts atomic.Int32

// forceSetCurrent makes every entry call cuCtxSetCurrent, as with several
// contexts; the tests and benchmarks use it to cover and time both paths.
var forceSetCurrent atomic.Bool

func setEveryCall() bool { return liveContexts.Load() > 1 || forceSetCurrent.Load() }

// PrimaryContext retains the device's primary context on first use and
// returns the same *Context on every later call.
func (dev Device) PrimaryContext() (*Context, error) {
	d, h, err := dev.handle()
	if err != nil {
		return nil, err
	}
	contexts.mu.Lock()
	defer contexts.mu.Unlock()
	if c := contexts.byDev[dev]; c != nil {
		return c, nil
	}
	props, err := dev.Properties()
	if err != nil {
		return nil, err
	}
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(d.primaryCtxRetain.addr, f.outAddr(0), h)); r != cudaSuccess {
		return nil, d.newError(d.primaryCtxRetain.name, r, dev.String())
	}
	c := &Context{dev: dev, h: uintptr(f.out[0]), drv: d, props: props}
	if contexts.byDev == nil {
		contexts.byDev = make(map[Device]*Context)
	}
	contexts.byDev[dev] = c
	liveContexts.Add(1)
	return c, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Handle returns the CUcontext, for code that calls the driver itself
// (inside Do, so that it is current).
func (c *Context) Handle() uintptr { return c.h }

// Properties returns the device's properties, read when the context was
// retained.
func (c *Context) Properties() Properties { return c.props }

// status is the outcome of one entry: the result code and the C function
// that produced it (the call itself, or cuCtxSetCurrent if that failed).
type status struct {
	code uint32
	call string
}

func (s status) ok() bool { return s.code == cudaSuccess }

// err builds the *Error of a failed status; detail names the arguments.
func (s status) err(detail string) error { return newDriverError(s.call, s.code, detail) }

// invoke calls sym with the context current on this thread. args must
// hold no Go pointers other than f's slots; it allocates nothing.
func (c *Context) invoke(f *frame, sym symbol, args ...uintptr) status {
	runtime.LockOSThread()
	s := c.invokeLocked(f, sym, args)
	runtime.UnlockOSThread()
	return s
}

func (c *Context) invokeLocked(f *frame, sym symbol, args []uintptr) status {
	if armedCall.Load() != nil { // fault.go
		if code, ok := injectedStatus(sym.name); ok {
			return status{code, sym.name}
		}
	}
	setCur := c.drv.ctxSetCurrent
	if setEveryCall() {
		if r := uint32(f.call(setCur.addr, c.h)); r != cudaSuccess {
			return status{r, setCur.name}
		}
		return status{uint32(f.call(sym.addr, args...)), sym.name}
	}
	r := uint32(f.call(sym.addr, args...))
	if r == cudaErrorInvalidContext {
		if r := uint32(f.call(setCur.addr, c.h)); r != cudaSuccess {
			return status{r, setCur.name}
		}
		r = uint32(f.call(sym.addr, args...))
	}
	return status{r, sym.name}
}

// invokeGo is invoke for calls whose arguments point into Go memory (host
// buffers, names, JIT options): the caller converts the pointers in the
// argument list, and go:uintptrescapes keeps them valid for the call. It
// allocates the argument slice.
//
//go:uintptrescapes
func (c *Context) invokeGo(sym symbol, args ...uintptr) status {
	if armedCall.Load() != nil { // fault.go
		if code, ok := injectedStatus(sym.name); ok {
			return status{code, sym.name}
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	setCur := c.drv.ctxSetCurrent
	if setEveryCall() {
		if r := uint32(ccall(setCur.addr, c.h)); r != cudaSuccess {
			return status{r, setCur.name}
		}
		return status{uint32(ccall(sym.addr, args...)), sym.name}
	}
	r := uint32(ccall(sym.addr, args...))
	if r == cudaErrorInvalidContext {
		if r := uint32(ccall(setCur.addr, c.h)); r != cudaSuccess {
			return status{r, setCur.name}
		}
		r = uint32(ccall(sym.addr, args...))
	}
	return status{r, sym.name}
}

// Do runs fn on one OS thread with the context current there: the
// goroutine is locked to its thread for the duration and the context is
// made current once, up front. Inside fn, calls into this package find it
// current (no retry while one context is in use; with several, each call
// still sets its own), and code may call the driver or another CUDA
// library directly with Handle(). Use it for a batch of launches, or
// wherever a sequence of calls must stay on one thread.
func (c *Context) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.makeCurrent(); err != nil {
		return err
	}
	return fn()
}

// makeCurrent sets the context current on the calling thread, which the
// caller has locked.
func (c *Context) makeCurrent() error {
	f := getFrame()
	defer f.release()
	if r := uint32(f.call(c.drv.ctxSetCurrent.addr, c.h)); r != cudaSuccess {
		return newDriverError(c.drv.ctxSetCurrent.name, r, c.dev.String())
	}
	return nil
}

// Synchronize blocks until all work queued in the context has finished,
// and reports an error from any of it (a failed kernel surfaces here).
func (c *Context) Synchronize() error {
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.ctxSynchronize); !s.ok() {
		return s.err(c.dev.String())
	}
	return nil
}

// MemGetInfo returns the device's free and total memory in bytes, as the
// driver sees them (other processes' use included).
func (c *Context) MemGetInfo() (free, total int, err error) {
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.memGetInfo, f.outAddr(0), f.outAddr(1)); !s.ok() {
		return 0, 0, s.err(c.dev.String())
	}
	return int(f.out[0]), int(f.out[1]), nil
}
