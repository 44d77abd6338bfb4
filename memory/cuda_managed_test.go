package memory_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// deviceCopy copies n bytes from src (any device-visible address) into
// fresh device memory with cuMemcpyDtoD and reads them back on the host:
// what a kernel reading src would see.
func deviceCopy(t *testing.T, c *cuda.Context, src uintptr, n int) []byte {
	t.Helper()
	dst, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.MemFree(dst)) }()
	require.NoError(t, c.MemcpyDtoD(dst, cuda.DevicePtr(src), n))
	return readDevice(t, c, uintptr(dst), n)
}

func TestGPUManagedAdviseAndPrefetch(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().ManagedMemory {
		t.Skip("the device has no managed memory")
	}
	// The hybrid policy for embeddings and frozen weights, and two roles
	// placed so that every advice kind is set, and cleared, on pages the
	// roles share: preferring the host and mapped for it; preferring the
	// device with every flag.
	p := memory.HybridPolicy()
	p.Placements[memory.RoleOther] = memory.Placement{Tier: memory.TierManaged, Advice: memory.AdvisePreferHost | memory.AdviseAccessedByHost}
	all := memory.AdviseReadMostly | memory.AdvisePreferDevice | memory.AdviseAccessedByDevice | memory.AdviseAccessedByHost | memory.AdvisePrefetchToDevice
	p.Placements[memory.RoleActivation] = memory.Placement{Tier: memory.TierManaged, Advice: all}
	m, err := memory.NewCUDAManager(c, memory.Config{Policy: p})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()

	for _, tc := range []struct {
		role memory.Role
		size int64
	}{
		{memory.RoleFrozenWeight, 64 * MiB},
		{memory.RoleEmbedding, 16*MiB + 123},
		{memory.RoleOther, 300 * KiB},
		{memory.RoleActivation, 300 * KiB}, // same small segment: clears RoleOther's flags on shared pages
		{memory.RoleEmbedding, 5000},
	} {
		a, err := m.Alloc(tc.size, tc.role)
		require.NoError(t, err, "%s: %s", tc.role, memory.FormatBytes(tc.size))
		require.Equal(t, memory.TierManaged, a.Tier())
		require.Len(t, a.Host(), int(tc.size))
		assert.Equal(t, p.Placements[tc.role].Advice, a.Advice())

		// Fill from the host, move the pages to the device as a loader
		// would, and read them on the GPU.
		want := randomBytes(uint64(tc.size), int(tc.size))
		copy(a.Host(), want)
		free0, _, err := c.MemGetInfo()
		require.NoError(t, err)
		require.NoError(t, m.Prefetch(a, 0))
		require.NoError(t, c.Synchronize())
		free1, _, err := c.MemGetInfo()
		require.NoError(t, err)
		t.Logf("%s, %s (%s): device free %s -> %s after the prefetch", tc.role, memory.FormatBytes(tc.size), a.Advice(),
			memory.FormatBytes(int64(free0)), memory.FormatBytes(int64(free1)))
		assert.True(t, bytes.Equal(want, deviceCopy(t, c, a.Addr(), int(tc.size))), "%s: the GPU reads what the host wrote", tc.role)

		// Write on the GPU; the host sees it (pages migrate back, or
		// read-mostly copies are invalidated).
		require.NoError(t, c.MemsetD8(cuda.DevicePtr(a.Addr()), 0x5A, int(tc.size)))
		require.NoError(t, c.Synchronize())
		h := a.Host()
		assert.Equal(t, byte(0x5A), h[0], "%s: first byte after a device write", tc.role)
		assert.Equal(t, byte(0x5A), h[len(h)-1], "%s: last byte after a device write", tc.role)
		assert.Equal(t, -1, firstNot(h[:min(len(h), 1<<20)], 0x5A), "%s: first MiB after a device write", tc.role)
		require.NoError(t, a.Free())
	}
	s := m.Stats().Tiers[memory.TierManaged]
	assert.Equal(t, int64(5), s.Allocs)
	t.Log("\n" + m.Summary())
}

func TestGPUManagedRefusesOversubscription(t *testing.T) {
	c := gpuContext(t)
	if !c.Properties().ManagedMemory {
		t.Skip("the device has no managed memory")
	}
	b := memory.NewManagedBackend(c)
	free, total, ok := b.Info()
	require.True(t, ok)
	var err error
	var calls uint64
	// Inside Do the context is current on the thread, so each call into
	// the driver is exactly one.
	require.NoError(t, c.Do(func() error {
		before := cuda.DriverCalls()
		_, err = b.Alloc(free)
		calls = cuda.DriverCalls() - before
		return nil
	}))
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "all the free memory, headroom included")
	assert.Contains(t, err.Error(), "headroom")
	assert.Equal(t, uint64(1), calls, "only cuMemGetInfo was called: the driver was never asked for the memory")
	t.Log(err)

	_, err = b.Alloc(total)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)

	// A pool over it turns the refusal into an OOMError after flushing.
	p := memory.NewPool(b, memory.PoolConfig{})
	_, err = p.Alloc(free, 0)
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, memory.TierManaged, oom.Tier)
	require.NoError(t, p.Close())
}

// firstNot returns the index of the first byte of b that is not v, or -1.
func firstNot(b []byte, v byte) int {
	for i, x := range b {
		if x != v {
			return i
		}
	}
	return -1
}
