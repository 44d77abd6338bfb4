package cuda

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// argValue reads back argument i the way the driver does: through the
// i-th kernelParams pointer.
func argValue(a *Args, i, size int) []byte {
	return unsafe.Slice((*byte)(addrPointer(a.ptrs()[i])), size)
}

func TestArgsLayout(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	hp := addrPointer(0x7000_0000_1000)
	a.Uint8(0xAB).Ptr(0x1234_5678_9ABC).Int32(-5).Float32(1.5).Uint16(0xBEEF).Float64(math.Pi).Bool(true).
		Int64(-1<<40).HostPtr(hp).Bytes([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 4)
	require.NoError(t, a.Err())
	require.Equal(t, 10, a.Len())

	le := func(b []byte) uint64 {
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	assert.Equal(t, uint64(0xAB), le(argValue(a, 0, 1)))
	assert.Equal(t, uint64(0x1234_5678_9ABC), le(argValue(a, 1, 8)))
	assert.Equal(t, uint64(uint32(0xFFFFFFFB)), le(argValue(a, 2, 4)))
	assert.Equal(t, uint64(math.Float32bits(1.5)), le(argValue(a, 3, 4)))
	assert.Equal(t, uint64(0xBEEF), le(argValue(a, 4, 2)))
	assert.Equal(t, math.Float64bits(math.Pi), le(argValue(a, 5, 8)))
	assert.Equal(t, uint64(1), le(argValue(a, 6, 1)))
	assert.Equal(t, uint64(1<<64-1<<40), le(argValue(a, 7, 8)))
	assert.Equal(t, uint64(0x7000_0000_1000), le(argValue(a, 8, 8)))
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, argValue(a, 9, 12))

	// Every value is naturally aligned and lies in the value area of the
	// block, after the pointer array; values do not overlap.
	sizes := []int{1, 8, 4, 4, 2, 8, 1, 8, 8, 12}
	aligns := []int{1, 8, 4, 4, 2, 8, 1, 8, 8, 4}
	base := uintptr(a.block)
	prevEnd := base + argPtrBytes
	for i := range sizes {
		p := a.ptrs()[i]
		assert.Zero(t, p%uintptr(aligns[i]), "argument %d alignment", i)
		assert.GreaterOrEqual(t, p, prevEnd, "argument %d overlaps the previous one", i)
		prevEnd = p + uintptr(sizes[i])
		assert.Equal(t, uint16(sizes[i]), a.sizes[i])
	}
	assert.LessOrEqual(t, prevEnd, base+argBlockBytes)

	a.Reset()
	assert.Zero(t, a.Len())
	a.Int32(7)
	assert.Equal(t, uint64(7), le(argValue(a, 0, 4)))
}

func TestArgsAdd(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	var x float32 = 2.5
	a.Add(DevicePtr(0x10)).Add(uintptr(0x20)).Add(int8(-1)).Add(uint8(2)).Add(int16(-3)).Add(uint16(4)).
		Add(int32(-5)).Add(uint32(6)).Add(x).Add(int64(-7)).Add(uint64(8)).Add(9.5).Add(true).Add(unsafe.Pointer(nil))
	require.NoError(t, a.Err())
	assert.Equal(t, []uint16{8, 8, 1, 1, 2, 2, 4, 4, 4, 8, 8, 8, 1, 8}, a.sizes[:a.Len()])

	a.Reset().Add(int32(1)).Add(7)
	require.ErrorIs(t, a.Err(), ErrInvalidValue)
	assert.Contains(t, a.Err().Error(), "argument 2 is a Go int (7)")
	assert.Contains(t, a.Err().Error(), "pass int32")
	a.Add(int32(3))
	assert.Equal(t, 1, a.Len(), "nothing is added after a mistake")

	a.Reset().Add("text")
	assert.ErrorContains(t, a.Err(), "argument 1 has unsupported type string")
	a.Reset().Bytes([]byte{1}, 3)
	assert.ErrorContains(t, a.Err(), "alignment 3")
	a.Reset().Bytes(nil, 4)
	assert.ErrorContains(t, a.Err(), "empty")
	a.Reset()
	assert.NoError(t, a.Err(), "Reset clears the mistake")
}

func TestArgsLimits(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	for range MaxKernelArgs {
		a.Uint8(1)
	}
	require.NoError(t, a.Err())
	a.Uint8(1)
	assert.ErrorContains(t, a.Err(), "argument 513: more than 512 arguments")

	a.Reset()
	chunk := make([]byte, 16)
	for range MaxKernelArgBytes / 16 {
		a.Bytes(chunk, 16)
	}
	require.NoError(t, a.Err())
	a.Uint32(1)
	assert.ErrorContains(t, a.Err(), "exceed 4096 bytes")

	a.Free()
	a.Free() // idempotent
	a.Reset().Int32(1)
	assert.ErrorContains(t, a.Err(), "used after Free")
}

func TestArgsDoNotAllocate(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	allocs := testing.AllocsPerRun(200, func() {
		a.Reset().Ptr(1).Ptr(2).Ptr(3).Int32(4).Float32(5)
	})
	assert.Zero(t, allocs)
}

func TestArgsBlocksAreRecycled(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	p := a.block
	a.Free()
	b, err := NewArgs()
	require.NoError(t, err)
	assert.Equal(t, p, b.block, "a freed block is handed out next")
	b.Free()

	// A dropped Args returns its block through its cleanup.
	var dropped unsafe.Pointer
	func() {
		c, err := NewArgs()
		require.NoError(t, err)
		c.Int32(1)
		dropped = c.block
		require.False(t, isFree(dropped), "a live Args holds its block")
	}()
	ok := false
	for range 50 {
		runtime.GC()
		if ok = isFree(dropped); ok {
			break
		}
		runtime.Gosched()
	}
	assert.True(t, ok, "dropped Args did not return its block")
}

// isFree reports whether block is on the arena's free list.
func isFree(block unsafe.Pointer) bool {
	argArena.mu.Lock()
	defer argArena.mu.Unlock()
	for _, p := range argArena.free {
		if p == block {
			return true
		}
	}
	return false
}

func TestArgsCheckParams(t *testing.T) {
	a, err := NewArgs()
	require.NoError(t, err)
	defer a.Free()
	fn := &Function{name: "vadd", params: []int{8, 8, 8, 4}}
	a.Ptr(1).Ptr(2).Ptr(3).Int32(4)
	assert.NoError(t, a.checkParams(fn))
	a.Reset().Ptr(1).Ptr(2).Ptr(3)
	assert.ErrorContains(t, a.checkParams(fn), "kernel vadd takes 4 parameters, got 3 arguments")
	a.Reset().Ptr(1).Ptr(2).Ptr(3).Int64(4)
	err = a.checkParams(fn)
	assert.ErrorContains(t, err, "kernel vadd parameter 3 is 4 bytes, argument 4 is 8 bytes")
	assert.ErrorIs(t, err, ErrInvalidValue)
	unknown := &Function{name: "old", params: nil}
	assert.NoError(t, a.checkParams(unknown), "sizes unknown: no check")
	assert.True(t, strings.HasPrefix(a.String(), "4 kernel arguments"))
}
