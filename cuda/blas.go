package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

// blasLib is the loaded libcublas.
type blasLib struct {
	path string

	create, destroy, setStream, setWorkspace, setMathMode, getVersion symbol
	sgemmStridedBatched, gemmStridedBatchedEx                         symbol

	getStatusName, getStatusString uintptr // optional (cuBLAS 11.4.2+)
}

func (l *blasLib) symbols() []symbolSpec {
	req := func(dst *symbol, names ...string) symbolSpec { return symbolSpec{dst, true, names} }
	return []symbolSpec{
		req(&l.create, "cublasCreate_v2"),
		req(&l.destroy, "cublasDestroy_v2"),
		req(&l.setStream, "cublasSetStream_v2"),
		req(&l.setWorkspace, "cublasSetWorkspace_v2"),
		req(&l.setMathMode, "cublasSetMathMode"),
		req(&l.getVersion, "cublasGetVersion_v2"),
		req(&l.sgemmStridedBatched, "cublasSgemmStridedBatched"),
		req(&l.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx"),
	}
}

// loadBLAS finds libcublas and resolves its symbols.
func loadBLAS(getenv func(string) string) (*blasLib, error) {
	l := &blasLib{}
	var err error
	l.path, l.getStatusName, l.getStatusString, err = loadBLASFamily(cublasSpec(), "cuBLAS", "cublas", ErrNoCUBLAS, l.symbols(), getenv)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// loadBLASFamily opens a library of the cuBLAS family (libcublas,
// libcublasLt), resolves syms and looks up its optional status-name
// functions (prefix + GetStatusName, GetStatusString); a library that
// lacks a required symbol is not the family's version 12 or 13, an error
// naming what and wrapping sentinel.
func loadBLASFamily(spec libSpec, what, prefix string, sentinel error, syms []symbolSpec, getenv func(string) string) (path string, statusName, statusString uintptr, err error) {
	h, path, err := openLibrary(spec, getenv)
	if err != nil {
		return "", 0, 0, err
	}
	if missing := resolve(h, syms); len(missing) > 0 {
		return "", 0, 0, fmt.Errorf("cuda: %s lacks %s: it is not %s 12 or 13; %s: %w",
			path, strings.Join(missing, ", "), what, spec.Fix, sentinel)
	}
	statusName, _ = dlsym(h, prefix+"GetStatusName")
	statusString, _ = dlsym(h, prefix+"GetStatusString")
	return path, statusName, statusString, nil
}

var blasState struct {
	once sync.Once
	lib  *blasLib
	err  error
}

func getBLAS() (*blasLib, error) {
	blasState.once.Do(func() { blasState.lib, blasState.err = loadBLAS(os.Getenv) })
	return blasState.lib, blasState.err
}

// BLAS is a cuBLAS handle bound to one context. Its methods serialise on
// a mutex (a cuBLAS handle must not be used by two threads at once), so
// goroutines that run GEMMs concurrently should each have their own
// handle, usually with their own stream.
type BLAS struct {
	ctx *Context
	lib *blasLib
	h   uintptr

	mu        sync.Mutex
	stream    *Stream
	ws        DevicePtr
	wsSize    int
	version   int
	destroyed bool
}

// NewBLAS loads cuBLAS (once per process) and creates a handle for the
// context. The handle works on the default stream until SetStream.
func (c *Context) NewBLAS() (*BLAS, error) {
	lib, err := getBLAS()
	if err != nil {
		return nil, err
	}
	b := &BLAS{ctx: c, lib: lib}
	f := getFrame()
	defer f.release()
	if st, err := b.invoke(f, lib.create, f.outAddr(0)); err != nil {
		return nil, err
	} else if st != cublasStatusSuccess {
		return nil, newBLASError(lib, lib.create.name, st, c.dev.String())
	}
	b.h = uintptr(f.out[0])
	st, err := b.invoke(f, lib.getVersion, b.h, f.outAddr(1))
	if err == nil && st != cublasStatusSuccess {
		err = newBLASError(lib, lib.getVersion.name, st, "")
	}
	if err != nil {
		_, _ = b.invoke(f, lib.destroy, b.h) // do not leak the handle
		return nil, err
	}
	b.version = int(f.out32(1))
	return b, nil
}

// invoke calls a cuBLAS function with the context current on this thread
// (always set: cuBLAS takes its device from the current context). It
// returns the cuBLAS status, or an error if the context could not be made
// current. It allocates nothing.
func (b *BLAS) invoke(f *frame, sym symbol, args ...uintptr) (uint32, error) {
	return b.ctx.invokeBLASFamily(f, sym, args...)
}

// invokeBLASFamily calls a cuBLAS or cuBLASLt function with the context
// current on this thread, the injected status instead when a fault test
// armed one (fault.go).
func (c *Context) invokeBLASFamily(f *frame, sym symbol, args ...uintptr) (uint32, error) {
	if armedCall.Load() != nil { // fault.go
		if code, ok := injectedStatus(sym.name); ok {
			return injectedBLASStatus(code), nil
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	set := c.drv.ctxSetCurrent
	if r := uint32(f.call(set.addr, c.h)); r != cudaSuccess {
		return 0, newDriverError(set.name, r, c.dev.String())
	}
	return uint32(f.call(sym.addr, args...)), nil
}

// made refuses a nil BLAS and one not made by NewBLAS (the zero value),
// which has no context or library to call.
func (b *BLAS) made(op string) error {
	if b == nil || b.ctx == nil || b.lib == nil {
		return invalidArg(op, "cuBLAS handle not made by NewBLAS")
	}
	return nil
}

// call runs sym under the handle's lock; detail describes the call for an
// error and is only evaluated on failure.
func (b *BLAS) call(op string, sym symbol, detail func() string, args ...uintptr) error {
	if b.destroyed {
		return invalidArg(op, "cuBLAS handle was destroyed")
	}
	f := getFrame()
	defer f.release()
	st, err := b.invoke(f, sym, args...)
	if err != nil {
		return err
	}
	if st != cublasStatusSuccess {
		return newBLASError(b.lib, sym.name, st, detail())
	}
	return nil
}

// Version returns cuBLAS's version number (e.g. 130000).
func (b *BLAS) Version() int { return b.version }

// LibraryPath returns the file cuBLAS was loaded from.
func (b *BLAS) LibraryPath() string { return b.lib.path }

// Context returns the handle's context.
func (b *BLAS) Context() *Context { return b.ctx }

// Stream returns the stream the handle queues work on (nil: default).
func (b *BLAS) Stream() *Stream {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stream
}

// SetStream makes later calls queue their work on s (nil: the default
// stream). cuBLAS drops a user workspace when the stream changes; this
// method sets it again.
func (b *BLAS) SetStream(s *Stream) error {
	if err := b.made("BLAS.SetStream"); err != nil {
		return err
	}
	sh, err := b.ctx.streamHandle("BLAS.SetStream", s)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.call("BLAS.SetStream", b.lib.setStream, s.String, b.h, sh); err != nil {
		return err
	}
	b.stream = s
	if b.ws != 0 {
		return b.setWorkspaceLocked(b.ws, b.wsSize)
	}
	return nil
}

// SetWorkspace gives cuBLAS size bytes of device memory at p (256-byte
// aligned, from the caller's pool) for its scratch space instead of its
// own allocations. The memory must stay allocated, and unused by anything
// else, until the handle is destroyed or given another workspace. cuBLAS
// recommends 4 MiB, and 32 MiB on Hopper. SetWorkspace(0, 0) hands the
// scratch space back to cuBLAS's own pool.
func (b *BLAS) SetWorkspace(p DevicePtr, size int) error {
	if size < 0 {
		return invalidArg("BLAS.SetWorkspace", "negative size %d", size)
	}
	if (p == 0) != (size == 0) {
		return invalidArg("BLAS.SetWorkspace", "pointer %s with size %d: give both or neither", p, size)
	}
	if p%256 != 0 {
		return invalidArg("BLAS.SetWorkspace", "pointer %s is not 256-byte aligned", p)
	}
	if err := b.made("BLAS.SetWorkspace"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p == 0 {
		if err := boundStream("BLAS.SetWorkspace", b.stream); err != nil {
			return err
		}
		// cublasSetStream resets the workspace to cuBLAS's default pool.
		err := b.call("BLAS.SetWorkspace", b.lib.setStream, b.stream.String, b.h, b.stream.Handle())
		if err == nil {
			b.ws, b.wsSize = 0, 0
		}
		return err
	}
	return b.setWorkspaceLocked(p, size)
}

func (b *BLAS) setWorkspaceLocked(p DevicePtr, size int) error {
	err := b.call("BLAS.SetWorkspace", b.lib.setWorkspace, func() string { return fmt.Sprintf("%d bytes at %s", size, p) },
		b.h, uintptr(p), uintptr(size))
	if err != nil {
		return err
	}
	b.ws, b.wsSize = p, size
	return nil
}

// SetMathMode chooses between exact and faster arithmetic (see MathMode).
func (b *BLAS) SetMathMode(m MathMode) error {
	if err := b.made("BLAS.SetMathMode"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.call("BLAS.SetMathMode", b.lib.setMathMode, func() string { return fmt.Sprintf("mode %d", m) }, b.h, uintptr(m))
}

// Destroy releases the handle. Destroying twice is a no-op.
func (b *BLAS) Destroy() error {
	if err := b.made("BLAS.Destroy"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.destroyed {
		return nil
	}
	if err := b.call("BLAS.Destroy", b.lib.destroy, b.ctx.dev.String, b.h); err != nil {
		return err
	}
	b.destroyed = true
	return nil
}
