package cuda

import (
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrameCall(t *testing.T) {
	labs := libcSym(t, "labs")
	f := getFrame()
	defer f.release()
	assert.Equal(t, uintptr(42), f.call(labs.addr, uintptr(42)))
	neg := -7
	assert.Equal(t, uintptr(7), f.call(labs.addr, uintptr(neg)))

	// Out-parameters: memset writes through the address of an out slot.
	memset := libcSym(t, "memset")
	f.out[2] = 0
	f.call(memset.addr, f.outAddr(2), 0xAB, 8)
	assert.Equal(t, uint64(0xABABABABABABABAB), f.out[2])
}

func TestCcallGoPointers(t *testing.T) {
	memcpy := libcSym(t, "memcpy")
	src := []byte("strata")
	dst := make([]byte, len(src))
	ccall(memcpy.addr, uintptr(unsafe.Pointer(&dst[0])), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
	assert.Equal(t, src, dst)

	strlen := libcSym(t, "strlen")
	s := cStringBytes("seven c")
	assert.Equal(t, uintptr(7), ccall(strlen.addr, uintptr(unsafe.Pointer(&s[0]))))
	assert.Equal(t, "seven c", cString(uintptr(unsafe.Pointer(&s[0]))))
	assert.Equal(t, "", cString(0))
}

func TestFrameCallDoesNotAllocate(t *testing.T) {
	labs := libcSym(t, "labs")
	allocs := testing.AllocsPerRun(200, func() {
		f := getFrame()
		f.call(labs.addr, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
		f.release()
	})
	assert.Zero(t, allocs)
}

// The entry strategy, run against libc: the fake entry points return
// their first argument, so 201 plays CUDA_ERROR_INVALID_CONTEXT.
func TestEntryOptimisticRetriesOnInvalidContext(t *testing.T) {
	c := fakeContext(t)
	fake := c.drv.memFree
	f := getFrame()
	defer f.release()

	before := DriverCalls()
	s := c.invoke(f, fake, 0)
	assert.True(t, s.ok())
	assert.Equal(t, uint64(1), DriverCalls()-before, "optimistic entry: one call")

	before = DriverCalls()
	s = c.invoke(f, fake, cudaErrorInvalidContext)
	assert.Equal(t, uint64(3), DriverCalls()-before, "call, cuCtxSetCurrent, retry")
	assert.Equal(t, uint32(cudaErrorInvalidContext), s.code)
	assert.Equal(t, "cuMemFree_v2", s.call)

	// A failing cuCtxSetCurrent is what the error names.
	c.h = 2
	s = c.invoke(f, fake, cudaErrorInvalidContext)
	assert.Equal(t, "cuCtxSetCurrent", s.call)
	assert.Equal(t, uint32(2), s.code)
	err := s.err("cuda:0")
	require.ErrorIs(t, err, ErrOutOfMemory)
}

func TestEntrySetEveryCall(t *testing.T) {
	c := fakeContext(t)
	forceSetCurrent.Store(true)
	defer forceSetCurrent.Store(false)
	f := getFrame()
	defer f.release()
	before := DriverCalls()
	assert.True(t, c.invoke(f, c.drv.memFree, 0).ok())
	assert.Equal(t, uint64(2), DriverCalls()-before, "cuCtxSetCurrent then the call")

	before = DriverCalls()
	assert.True(t, c.invokeGo(c.drv.memFree, 0).ok())
	assert.Equal(t, uint64(2), DriverCalls()-before)
}

func TestEntryDoesNotAllocate(t *testing.T) {
	c := fakeContext(t)
	allocs := testing.AllocsPerRun(200, func() {
		f := getFrame()
		c.invoke(f, c.drv.memsetD32Async, 0, 1, 2, 3)
		f.release()
	})
	assert.Zero(t, allocs)
}

func TestDriverErrorsThroughEntry(t *testing.T) {
	c := fakeContext(t)
	// cuMemcpyDtoD_v2 "returns" its destination: 2 is out of memory.
	err := c.MemcpyDtoD(2, 1, 8)
	require.ErrorIs(t, err, ErrOutOfMemory)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "cuMemcpyDtoD_v2", e.Call)
	assert.Equal(t, "8 bytes from 0x1 to 0x2", e.Detail)
	assert.Equal(t, 2, e.Code)

	require.NoError(t, c.MemcpyDtoD(0x1000, 0x2000, 0), "zero bytes: no call")
	require.ErrorIs(t, c.MemcpyDtoD(0, 0x2000, 4), ErrInvalidValue)
	require.ErrorIs(t, c.MemcpyDtoD(0x1000, 0x2000, -1), ErrInvalidValue)
	require.ErrorIs(t, c.MemcpyHtoDPtr(0x1000, nil, 4), ErrInvalidValue)
	require.ErrorIs(t, c.MemsetD32(0x1002, 0, 4), ErrInvalidValue, "unaligned")
	require.ErrorIs(t, c.MemFree(0), ErrInvalidValue)
	_, err = c.MemAlloc(0)
	require.ErrorIs(t, err, ErrInvalidValue)
	_, _, err = c.MemHostAlloc(16, 0x80)
	require.ErrorIs(t, err, ErrInvalidValue)
	_, err = c.NewEvent(0x40)
	require.ErrorIs(t, err, ErrInvalidValue)

	// Stream checks happen before any call.
	other := &Context{dev: 1, drv: c.drv}
	s := &Stream{ctx: other, h: 0x10}
	err = c.MemcpyDtoDAsync(0x1000, 0x2000, 4, s)
	require.ErrorIs(t, err, ErrInvalidValue)
	assert.Contains(t, err.Error(), "belongs to cuda:1, not cuda:0")
	s.destroyed = true
	assert.ErrorContains(t, s.Synchronize(), "was destroyed")
	assert.NoError(t, s.Destroy(), "second destroy is a no-op")
	var nilStream *Stream
	assert.ErrorIs(t, nilStream.Destroy(), ErrInvalidValue)
	assert.Equal(t, "default stream", nilStream.String())
}

var (
	manyArgsBuf    [256]byte
	manyArgsFormat = cStringBytes(strings.Repeat("%ld ", 20))
)

// The widest binding (cublasGemmStridedBatchedEx) passes 23 arguments,
// 17 of them on the stack: check their placement with snprintf.
func TestCallManyArguments(t *testing.T) {
	snprintf := libcSym(t, "snprintf")
	// Package-level memory: it never moves, so its address may travel in
	// a prebuilt argument slice.
	buf, format := manyArgsBuf[:], manyArgsFormat
	args := []uintptr{uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&format[0]))}
	want := ""
	for i := range 20 {
		v := i*1000 - 7
		args = append(args, uintptr(v))
		want += strconv.Itoa(v) + " "
	}
	require.Len(t, args, 23)
	n := ccall(snprintf.addr, args...)
	assert.Equal(t, uintptr(len(want)), n)
	assert.Equal(t, want, cString(uintptr(unsafe.Pointer(&buf[0]))))
}
