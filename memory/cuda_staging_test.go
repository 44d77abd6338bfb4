package memory_test

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

func TestGPUStagingZeroCopy(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().CanMapHostMemory {
		t.Skip("the device cannot map host memory")
	}
	for _, wc := range []bool{false, true} {
		b := memory.NewStagingBackend(c, wc)
		const n = 3<<20 + 5
		r, err := b.Alloc(n)
		require.NoError(t, err, b.Name())
		require.Len(t, r.Host, n)
		assert.Equal(t, r.Addr, uintptr(unsafe.Pointer(&r.Host[0])), "%s: under unified addressing the device alias is the host address", b.Name())

		// The host writes; the GPU reads the pages over the bus through
		// the device alias, with no copy to device memory first.
		want := randomBytes(11, n)
		copy(r.Host, want)
		assert.True(t, bytes.Equal(want, deviceCopy(t, c, r.Addr, n)), "%s: the GPU reads what the host wrote", b.Name())

		// The GPU writes through the alias; the host sees it.
		require.NoError(t, c.MemsetD8(cuda.DevicePtr(r.Addr).Add(1000), 0xC3, 5000))
		require.NoError(t, c.Synchronize())
		copy(want[1000:6000], bytes.Repeat([]byte{0xC3}, 5000))
		if !wc { // reading write-combined memory from the host is legal but very slow
			assert.True(t, bytes.Equal(want, r.Host), "%s: the host reads what the GPU wrote", b.Name())
		} else {
			assert.Equal(t, want[990:6010], r.Host[990:6010], b.Name())
		}
		require.NoError(t, b.Free(r))
		require.ErrorIs(t, b.Free(r), memory.ErrDoubleFree, b.Name())
	}
}

func TestGPUStagingPool(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().CanMapHostMemory {
		t.Skip("the device cannot map host memory")
	}
	p := memory.NewPool(memory.NewStagingBackend(c, false), memory.PoolConfig{})
	defer func() { require.NoError(t, p.Close()) }()
	var blocks []*memory.Block
	for i, n := range []int64{100, 4096, 70_000, 600_000} {
		blk := mustAlloc(t, p, n, 0)
		require.Len(t, blk.Host(), int(n))
		assert.Equal(t, blk.Addr(), uintptr(unsafe.Pointer(&blk.Host()[0])), "a block's host view starts at its device address")
		copy(blk.Host(), randomBytes(uint64(i), int(n)))
		blocks = append(blocks, blk)
	}
	assert.Equal(t, int64(1), p.Stats().BackendAllocs, "small transfer buffers share one 2 MiB pinned segment")
	for i, blk := range blocks {
		assert.True(t, bytes.Equal(randomBytes(uint64(i), int(blk.Size())), deviceCopy(t, c, blk.Addr(), int(blk.Size()))), "block %d", i)
		require.NoError(t, p.Free(blk))
	}
}
