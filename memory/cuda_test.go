package memory_test

// GPU tests of the CUDA backends and the CUDA manager. Every test named
// TestGPU* skips, with the reason, where no CUDA driver or device is
// usable, so CI (no GPU) compiles and runs the file but checks nothing
// here; the host-side logic they rely on (record-stream, advice, the
// managed headroom rule) is tested everywhere by the other files. On a GPU
// machine, build here and run there:
//
//	CGO_ENABLED=0 go test -c -o .gpu/ ./memory/
//	cd memory && ../.gpu/memory.test -test.run GPU -test.v
//
// Unified-memory tests stay within a few hundred MiB.

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// gpuContext returns device 0's primary context, or skips the test with
// the reason when there is no usable driver or GPU.
func gpuContext(t testing.TB) *cuda.Context {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("CUDA unavailable, GPU test skipped: %v", err)
	}
	n, err := cuda.DeviceCount()
	require.NoError(t, err)
	if n == 0 {
		t.Skip("the CUDA driver sees no device, GPU test skipped")
	}
	c, err := cuda.Device(0).PrimaryContext()
	require.NoError(t, err)
	return c
}

// randomBytes returns n bytes from a seeded generator.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readDevice copies n bytes at p back to the host.
func readDevice(t testing.TB, c *cuda.Context, p uintptr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	require.NoError(t, c.MemcpyDtoH(b, cuda.DevicePtr(p)))
	return b
}

func TestGPUBackendConformance(t *testing.T) {
	c := gpuContext(t)
	t.Run("device", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend { return memory.NewDeviceBackend(c) })
	})
	t.Run("managed", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend { return memory.NewManagedBackend(c) })
	})
	t.Run("staging", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend { return memory.NewStagingBackend(c, false) })
	})
	t.Run("offload", func(t *testing.T) {
		if !c.Properties().ManagedMemory {
			t.Skip("the device has no managed memory")
		}
		memtest.RunBackend(t, func() memory.Backend { return memory.NewOffloadBackend(c, 0) })
	})
	t.Run("staging-write-combined", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend { return memory.NewStagingBackend(c, true) })
	})
}

func TestGPUBackendNamesAndInfo(t *testing.T) {
	c := gpuContext(t)
	dev := c.Device().String()
	for _, want := range []struct {
		b    memory.Backend
		name string
		tier memory.Tier
	}{
		{memory.NewDeviceBackend(c), dev + " device", memory.TierDevice},
		{memory.NewManagedBackend(c), dev + " managed", memory.TierManaged},
		{memory.NewStagingBackend(c, false), dev + " staging", memory.TierStaging},
		{memory.NewStagingBackend(c, true), dev + " staging(write-combined)", memory.TierStaging},
	} {
		assert.Equal(t, want.name, want.b.Name())
		assert.Equal(t, want.tier, want.b.Tier())
		free, total, ok := want.b.Info()
		require.True(t, ok, "%s: Info", want.name)
		assert.Positive(t, free, want.name)
		assert.LessOrEqual(t, free, total, want.name)
	}
	free, total, _ := memory.NewDeviceBackend(c).Info()
	t.Logf("%s (%s): %s free of %s", dev, c.Properties().Name, memory.FormatBytes(free), memory.FormatBytes(total))
}

func TestGPUDeviceBackendErrors(t *testing.T) {
	c := gpuContext(t)
	b := memory.NewDeviceBackend(c)
	total := int64(c.Properties().TotalMem)
	_, err := b.Alloc(total + 1)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "more than the device has is refused without asking the driver")
	assert.Contains(t, err.Error(), "in all")

	// More than is free, but not more than the device has: the driver's
	// own out of memory, wrapped so that both sentinels hold.
	free, _, ok := b.Info()
	require.True(t, ok)
	if ask := free + (total-free)/2; ask > free+(64<<20) {
		_, err = b.Alloc(ask)
		require.ErrorIs(t, err, memory.ErrOutOfMemory, "Alloc(%s) with %s free", memory.FormatBytes(ask), memory.FormatBytes(free))
		require.ErrorIs(t, err, cuda.ErrOutOfMemory, "the driver's error is kept")
	} else {
		t.Logf("the device has only %s in use: cannot ask for more than is free and less than it has", memory.FormatBytes(total-free))
	}

	r, err := b.Alloc(4096)
	require.NoError(t, err)
	require.ErrorIs(t, b.Free(memory.Region{Addr: r.Addr, Size: 4095}), memory.ErrDoubleFree, "a region of the wrong size")
	require.ErrorIs(t, b.Free(memory.Region{Addr: r.Addr + 512, Size: 4096}), memory.ErrDoubleFree, "an address it never returned")
	require.NoError(t, b.Free(r))
	assert.Panics(t, func() { memory.NewDeviceBackend(nil) })
}

func TestGPUCUDAManager(t *testing.T) {
	c := gpuContext(t)
	t.Setenv(memory.EnvOffloadMemory, "") // the default backends
	m, err := memory.NewCUDAManager(c, memory.Config{})
	require.NoError(t, err)
	assert.Equal(t, memory.HybridPolicy(), m.Policy())
	dev := c.Device().String()

	assert.Equal(t, dev+" device", m.Pool(memory.TierDevice).Backend().Name())
	assert.Equal(t, "host", m.Pool(memory.TierHost).Backend().Name())
	assert.Equal(t, dev+" managed", m.Pool(memory.TierManaged).Backend().Name())
	assert.Equal(t, dev+" staging", m.Pool(memory.TierStaging).Backend().Name())
	if c.Properties().ManagedMemory {
		// Pinned memory by default (STRATA_OFFLOAD_MEMORY).
		assert.Equal(t, dev+" pinned", m.Pool(memory.TierOffload).Backend().Name())
		assert.True(t, m.HostPinned(memory.TierOffload))
	}
	assert.True(t, m.HostPinned(memory.TierStaging))
	assert.False(t, m.HostPinned(memory.TierDevice))
	assert.False(t, m.HostPinned(memory.TierManaged))
	_, isCUDA := m.StreamSync().(*memory.CUDAStreams)
	assert.True(t, isCUDA, "the CUDA manager makes its own CUDAStreams")

	const n = 100_000
	want := randomBytes(3, n)
	for r := range memory.NumRoles {
		a, err := m.Alloc(n, r)
		require.NoError(t, err, "role %s", r)
		// Every tier's Addr is a device address: a copy in and out of it
		// goes through the GPU whatever the tier.
		require.NoError(t, c.MemcpyHtoD(cuda.DevicePtr(a.Addr()), want), "role %s in %s", r, a.Tier())
		assert.True(t, bytes.Equal(want, readDevice(t, c, a.Addr(), n)), "role %s in %s", r, a.Tier())
		switch a.Tier() {
		case memory.TierDevice:
			assert.Nil(t, a.Host(), "role %s: device memory has no host view", r)
		case memory.TierManaged, memory.TierStaging, memory.TierOffload:
			require.NoError(t, c.Synchronize())
			assert.True(t, bytes.Equal(want, a.Host()), "role %s: the host view shows what the GPU wrote", r)
		}
		require.NoError(t, a.Free())
	}
	s := m.Stats()
	for _, tier := range []memory.Tier{memory.TierDevice, memory.TierManaged, memory.TierStaging} {
		assert.Positive(t, s.Tiers[tier].Allocs, "tier %s used by the hybrid policy", tier)
	}
	assert.Zero(t, s.Tiers[memory.TierHost].Allocs, "the hybrid policy places nothing in plain host memory")
	t.Log("\n" + m.Summary())
	require.NoError(t, m.Close())
	_, err = memory.NewCUDAManager(nil, memory.Config{})
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
}
