package memory_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// The caching pool over real device memory: the same algorithm the host
// tests check in detail, here with cuMemAlloc underneath and the data
// itself checked on the GPU.

// newDevicePool returns a pool over device memory, wrapped by a
// FaultBackend that tracks every region.
func newDevicePool(t *testing.T, c *cuda.Context, cfg memory.PoolConfig) (*memory.Pool, *memtest.FaultBackend) {
	t.Helper()
	fb := memtest.NewFaultBackend(memory.NewDeviceBackend(c), 0)
	return memory.NewPool(fb, cfg), fb
}

func TestGPUDevicePoolSplitCoalesceData(t *testing.T) {
	c := gpuContext(t)
	p, fb := newDevicePool(t, c, memory.PoolConfig{})
	// Small blocks share one 2 MiB segment; medium ones one 20 MiB segment.
	sizes := []int64{1, 700, 4096, 100_000, 1 << 20, MiB + 1, 3 * MiB, 5*MiB - 7}
	var blocks []*memory.Block
	for i, n := range sizes {
		b := mustAlloc(t, p, n, 0)
		assert.Zero(t, b.Addr()%memory.MinBlockSize, "block of %d bytes is 512-byte aligned", n)
		assert.Nil(t, b.Host(), "device memory has no host view")
		require.NoError(t, c.MemcpyHtoD(cuda.DevicePtr(b.Addr()), randomBytes(uint64(i), int(n))))
		blocks = append(blocks, b)
	}
	st := p.Stats()
	assert.Equal(t, int64(2), st.BackendAllocs, "one 2 MiB segment for the small blocks, one 20 MiB segment for the medium ones")
	for i, b := range blocks {
		assert.True(t, bytes.Equal(randomBytes(uint64(i), int(b.Size())), readDevice(t, c, b.Addr(), int(b.Size()))),
			"block %d of %d bytes holds what was written: no two blocks overlap", i, b.Size())
	}
	for _, b := range blocks {
		require.NoError(t, p.Free(b))
	}
	for _, s := range p.Segments() {
		assert.Len(t, s.Blocks, 1, "segment at %#x: its freed blocks coalesced into one", s.Addr)
	}
	// Reuse: the same requests again are served from the cache.
	for _, n := range sizes {
		require.NoError(t, p.Free(mustAlloc(t, p, n, 0)))
	}
	assert.Equal(t, int64(2), p.Stats().BackendAllocs, "no new segment for requests the cache can serve")
	closeClean(t, p, fb)
}

func TestGPUDevicePoolLimitOOM(t *testing.T) {
	c := gpuContext(t)
	p, fb := newDevicePool(t, c, memory.PoolConfig{Limit: 64 * MiB})
	a := mustAlloc(t, p, 40*MiB, 0)
	_, err := p.Alloc(40*MiB, 0)
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	assert.Equal(t, int64(40*MiB), oom.Requested)
	assert.Equal(t, int64(64*MiB), oom.Limit)
	assert.Equal(t, int64(40*MiB), oom.Allocated)
	assert.Positive(t, oom.DeviceTotal, "the OOM error carries cuMemGetInfo's numbers")
	assert.Positive(t, oom.DeviceFree)
	t.Log(err)
	require.NoError(t, p.Free(a))
	b := mustAlloc(t, p, 60*MiB, 0) // flushes the 40 MiB segment, then fits
	assert.Equal(t, int64(1), p.Stats().CacheFlushes)
	require.NoError(t, p.Free(b))
	closeClean(t, p, fb)
}

func TestGPUDevicePoolEmptyCacheReturnsMemory(t *testing.T) {
	c := gpuContext(t)
	p, fb := newDevicePool(t, c, memory.PoolConfig{})
	const size = 256 * MiB
	free0, _, err := c.MemGetInfo()
	require.NoError(t, err)
	a := mustAlloc(t, p, size, 0)
	require.NoError(t, p.Free(a))
	free1, _, err := c.MemGetInfo()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, int64(free0-free1), int64(size),
		"a freed block stays cached: the driver still counts its segment as used (free %s -> %s)", memory.FormatBytes(int64(free0)), memory.FormatBytes(int64(free1)))
	require.NoError(t, p.EmptyCache())
	free2, _, err := c.MemGetInfo()
	require.NoError(t, err)
	// Other processes may allocate meanwhile; the pool's own 256 MiB must
	// come back, within the driver's 2 MiB page granularity.
	assert.GreaterOrEqual(t, int64(free2), int64(free1)+size-2*MiB,
		"EmptyCache gives the segment back to the driver (free %s -> %s)", memory.FormatBytes(int64(free1)), memory.FormatBytes(int64(free2)))
	assert.Zero(t, p.Stats().Reserved.Current)
	closeClean(t, p, fb)
}

// TestGPUDevicePoolRandom runs FuzzPool's inputs over device memory: the
// pool's invariants checked after every step, and every live block filled
// with cuMemsetD8 and its edges read back before it is freed.
func TestGPUDevicePoolRandom(t *testing.T) {
	c := gpuContext(t)
	env := fuzzEnv{
		backend: func() memory.Backend { return memory.NewDeviceBackend(c) },
		fill: func(b *memory.Block, seed byte) error {
			return c.MemsetD8(cuda.DevicePtr(b.Addr()), seed, int(b.Size()))
		},
		check: func(b *memory.Block, seed byte) error { return checkDeviceFill(c, b, seed) },
	}
	for i, seed := range fuzzSeeds() {
		t.Run(fmt.Sprint(i), func(t *testing.T) { runPoolOps(t, seed, env) })
	}
}

// checkDeviceFill reads up to 4 KiB at each end of b and checks that every
// byte is seed: an overlapping block filled later would have changed them.
func checkDeviceFill(c *cuda.Context, b *memory.Block, seed byte) error {
	n := min(int(b.Size()), 4096)
	buf := make([]byte, n)
	for _, off := range []int{0, int(b.Size()) - n} {
		if err := c.MemcpyDtoH(buf, cuda.DevicePtr(b.Addr()).Add(off)); err != nil {
			return err
		}
		for i, v := range buf {
			if v != seed {
				return fmt.Errorf("byte %d of %d is %#x, not %#x", off+i, b.Size(), v, seed)
			}
		}
	}
	return nil
}
