package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBLAS and fakeBLASLt are handles whose cuBLAS entry points are all
// labs, like fakeContext's driver: a call "succeeds" with status 0 when
// its first argument (the handle) is 0.
func fakeBLAS(t *testing.T, c *Context) *BLAS {
	lib := &blasLib{path: "fake"}
	labs := libcSym(t, "labs")
	for _, s := range lib.symbols() {
		*s.dst = symbol{name: s.names[0], addr: labs.addr}
	}
	return &BLAS{ctx: c, lib: lib}
}

func fakeBLASLt(t *testing.T, c *Context) *BLASLt {
	lib := &ltLib{path: "fake"}
	labs := libcSym(t, "labs")
	for _, s := range lib.symbols() {
		*s.dst = symbol{name: s.names[0], addr: labs.addr}
	}
	return &BLASLt{ctx: c, lib: lib}
}

// A stream destroyed after a cuBLAS or cuBLASLt handle was bound to it is
// refused before any call: its CUstream dangles, and the driver may have
// handed the same value to a newer stream.
func TestBLASBoundStreamDestroyed(t *testing.T) {
	c := fakeContext(t)
	s := &Stream{ctx: c, h: 0x10}
	bl := fakeBLAS(t, c)
	bl.stream = s
	gemm := func() error {
		return bl.SgemmStridedBatchedRowMajor(OpN, OpN, 2, 2, 2, 1, 0x100, 2, 4, 0x200, 2, 4, 0, 0x300, 2, 4, 1)
	}
	require.NoError(t, gemm(), "live stream: reaches the fake library")
	s.destroyed = true
	before := DriverCalls()
	requireArgError(t, gemm(), "SgemmStridedBatchedRowMajor: the handle's stream 0x10 was destroyed")
	requireArgError(t, bl.SetWorkspace(0, 0), "BLAS.SetWorkspace: the handle's stream 0x10 was destroyed")

	lt := fakeBLASLt(t, c)
	lt.stream = s
	err := lt.Matmul(LtMatmul{M: 2, N: 2, K: 2, A: 0x100, LDA: 2, B: 0x200, LDB: 2, C: 0x300, LDC: 2, Compute: Compute32F})
	requireArgError(t, err, "BLASLt.Matmul: the handle's stream 0x10 was destroyed")
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver or cuBLAS call")
}

// A Function not obtained from Module.Function (the zero value) is an
// error at launch, not a nil dereference.
func TestLaunchZeroFunction(t *testing.T) {
	c := fakeContext(t)
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	require.NotPanics(t, func() {
		err = c.LaunchKernelArgs(&Function{}, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil, a)
	})
	requireArgError(t, err, "LaunchKernel: nil function")
}

// A binding with more arguments than a frame holds panics instead of
// silently dropping the excess.
func TestFrameCallTooManyArgs(t *testing.T) {
	labs := libcSym(t, "labs")
	f := getFrame()
	defer f.release()
	require.Panics(t, func() { f.call(labs.addr, make([]uintptr, maxCallArgs+1)...) })
	assert.Equal(t, uintptr(3), f.call(labs.addr, append([]uintptr{3}, make([]uintptr, maxCallArgs-1)...)...))
}

// A Stream or Event not made by NewStream or NewEvent (the zero value)
// is an error wherever it is used or destroyed, not a nil dereference.
func TestZeroStreamAndEvent(t *testing.T) {
	c := fakeContext(t)
	s, e := &Stream{}, &Event{}
	before := DriverCalls()
	for _, call := range []func() error{
		s.Synchronize, s.Destroy, e.Synchronize, e.Destroy,
		func() error { return c.MemsetD8Async(0x100, 0, 4, s) },
		func() error { return e.Record(nil) },
		func() error { return s.WaitEvent(e) },
	} {
		var err error
		require.NotPanics(t, func() { err = call() })
		requireArgError(t, err, "was not made by New")
	}
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")
}

// A Graph, GraphExec or Module not made by this package (the zero value),
// and a Function of such a module, are errors wherever they are used or
// destroyed, not a nil dereference.
func TestZeroGraphAndModule(t *testing.T) {
	c := fakeContext(t)
	s := &Stream{ctx: c, h: 0x10}
	g, x, m := &Graph{}, &GraphExec{}, &Module{}
	fn := &Function{mod: m, name: "vadd"}
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	one := [3]uint32{1, 1, 1}
	before := DriverCalls()
	for _, tc := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := g.Instantiate(); return err }, "Graph.Instantiate: graph 0x0 was not made by Stream.EndCapture"},
		{g.Destroy, "Graph.Destroy: graph 0x0 was not made by Stream.EndCapture"},
		{func() error { return x.Launch(s) }, "GraphExec.Launch: graph exec 0x0 was not made by Graph.Instantiate"},
		{func() error { return x.Launch(nil) }, "was not made by Graph.Instantiate"},
		{x.Destroy, "GraphExec.Destroy: graph exec 0x0 was not made by Graph.Instantiate"},
		{func() error { _, err := m.Function("vadd"); return err }, "Module.Function: module not made by ModuleLoadData"},
		{m.Unload, "Module.Unload: module not made by ModuleLoadData"},
		{func() error { var nilMod *Module; return nilMod.Unload() }, "Module.Unload: module not made by ModuleLoadData"},
		{func() error { _, err := fn.Attribute(FuncNumRegs); return err }, "Function.Attribute: nil function"},
		{func() error { return c.LaunchKernelArgs(fn, one, one, 0, nil, a) }, "LaunchKernel: nil function"},
	} {
		var err error
		require.NotPanics(t, func() { err = tc.call() }, tc.want)
		requireArgError(t, err, tc.want)
	}
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver call")
}

// A cuBLASLt Destroy whose handle release fails has already released the
// plans and the preference: later products and SetWorkspace are refused
// before any call (they would pass a null preference), and Destroy can be
// retried.
func TestBLASLtUnusableAfterFailedDestroy(t *testing.T) {
	c := fakeContext(t)
	lt := fakeBLASLt(t, c)
	FailCall("cublasLtDestroy", 1, 999)
	defer FailCall("", 0, 0)
	require.Error(t, lt.Destroy())
	before := DriverCalls()
	err := lt.Matmul(LtMatmul{M: 2, N: 2, K: 2, A: 0x100, LDA: 2, B: 0x200, LDB: 2, C: 0x300, LDC: 2, Compute: Compute32F})
	requireArgError(t, err, "BLASLt.Matmul: cuBLASLt handle's Destroy failed after releasing its plans and preference")
	requireArgError(t, lt.SetWorkspace(0x1000, 256), "BLASLt.SetWorkspace: cuBLASLt handle's Destroy failed")
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver or cuBLAS call")
	require.NoError(t, lt.Destroy(), "the retry releases the handle")
	requireArgError(t, lt.SetWorkspace(0, 0), "BLASLt.SetWorkspace: cuBLASLt handle was destroyed")
}

// SetStream on a destroyed cuBLASLt handle, or one whose Destroy failed,
// is refused as cuBLAS's SetStream refuses it, instead of reporting
// success for a handle nothing else may use.
func TestBLASLtSetStreamAfterDestroy(t *testing.T) {
	c := fakeContext(t)
	s := &Stream{ctx: c, h: 0x10}
	lt := fakeBLASLt(t, c)
	FailCall("cublasLtDestroy", 1, 999)
	defer FailCall("", 0, 0)
	require.Error(t, lt.Destroy())
	requireArgError(t, lt.SetStream(s), "BLASLt.SetStream: cuBLASLt handle's Destroy failed")
	assert.Nil(t, lt.stream, "the stream is not bound")
	require.NoError(t, lt.Destroy())
	requireArgError(t, lt.SetStream(nil), "BLASLt.SetStream: cuBLASLt handle was destroyed")

	bl := fakeBLAS(t, c)
	require.NoError(t, bl.Destroy())
	requireArgError(t, bl.SetStream(nil), "BLAS.SetStream: cuBLAS handle was destroyed")
}

// A BLAS or BLASLt handle not made by NewBLAS or NewBLASLt (nil, or the
// zero value) is an error wherever it is used or destroyed, not a nil
// dereference.
func TestZeroBLASHandles(t *testing.T) {
	c := fakeContext(t)
	s := &Stream{ctx: c, h: 0x10}
	lt := LtMatmul{M: 2, N: 2, K: 2, A: 0x100, LDA: 2, B: 0x200, LDB: 2, C: 0x300, LDC: 2, Compute: Compute32F}
	before := DriverCalls()
	for _, b := range []*BLAS{nil, {}} {
		for _, tc := range []struct {
			call func() error
			want string
		}{
			{func() error {
				return b.SgemmStridedBatchedRowMajor(OpN, OpN, 2, 2, 2, 1, 0x100, 2, 4, 0x200, 2, 4, 0, 0x300, 2, 4, 1)
			}, "SgemmStridedBatchedRowMajor: cuBLAS handle not made by NewBLAS"},
			{func() error { return b.SetStream(s) }, "BLAS.SetStream: cuBLAS handle not made by NewBLAS"},
			{func() error { return b.SetStream(nil) }, "BLAS.SetStream: cuBLAS handle not made by NewBLAS"},
			{func() error { return b.SetWorkspace(0, 0) }, "BLAS.SetWorkspace: cuBLAS handle not made by NewBLAS"},
			{func() error { return b.SetMathMode(MathDefault) }, "BLAS.SetMathMode: cuBLAS handle not made by NewBLAS"},
			{b.Destroy, "BLAS.Destroy: cuBLAS handle not made by NewBLAS"},
		} {
			var err error
			require.NotPanics(t, func() { err = tc.call() }, tc.want)
			requireArgError(t, err, tc.want)
		}
	}
	for _, b := range []*BLASLt{nil, {}} {
		for _, tc := range []struct {
			call func() error
			want string
		}{
			{func() error { return b.Matmul(lt) }, "BLASLt.Matmul: cuBLASLt handle not made by NewBLASLt"},
			{func() error { return b.SetStream(s) }, "BLASLt.SetStream: cuBLASLt handle not made by NewBLASLt"},
			{func() error { return b.SetWorkspace(0x1000, 256) }, "BLASLt.SetWorkspace: cuBLASLt handle not made by NewBLASLt"},
			{b.Destroy, "BLASLt.Destroy: cuBLASLt handle not made by NewBLASLt"},
		} {
			var err error
			require.NotPanics(t, func() { err = tc.call() }, tc.want)
			requireArgError(t, err, tc.want)
		}
	}
	assert.Equal(t, uint64(0), DriverCalls()-before, "no driver or cuBLAS call")
}
