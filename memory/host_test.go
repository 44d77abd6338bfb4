package memory_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func TestHostBackendConformance(t *testing.T) {
	for _, tier := range []memory.Tier{memory.TierHost, memory.TierStaging} {
		t.Run(tier.String(), func(t *testing.T) {
			memtest.RunBackend(t, func() memory.Backend { return memory.NewHostBackend(tier) })
		})
	}
}

func TestFaultBackendConformance(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend {
			return memtest.NewFaultBackend(memory.NewHostBackend(memory.TierHost), 256*MiB)
		})
	})
	t.Run("address", func(t *testing.T) {
		memtest.RunBackend(t, func() memory.Backend {
			return memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<40), 0)
		})
	})
}

func TestHostBackendNames(t *testing.T) {
	assert.Equal(t, "host", memory.NewHostBackend(memory.TierHost).Name())
	assert.Equal(t, "host(managed)", memory.NewHostBackend(memory.TierManaged).Name())
	assert.Equal(t, memory.TierStaging, memory.NewHostBackend(memory.TierStaging).Tier())
}

func TestHostBackendRejectsForeignRegions(t *testing.T) {
	h := memory.NewHostBackend(memory.TierHost)
	r, err := h.Alloc(8192)
	require.NoError(t, err)
	sub := memory.Region{Addr: r.Addr + 4096, Host: r.Host[4096:], Size: 4096}
	require.ErrorIs(t, h.Free(sub), memory.ErrDoubleFree, "a piece of a mapping is not a region")
	heap := make([]byte, 4096)
	require.ErrorIs(t, h.Free(memory.Region{Addr: r.Addr, Host: heap, Size: 4096}), memory.ErrDoubleFree)
	require.ErrorIs(t, h.Free(memory.Region{}), memory.ErrDoubleFree)
	require.NoError(t, h.Free(r))
}

// rssBytes reads the resident set size of this process.
func rssBytes(t *testing.T) int64 {
	data, err := os.ReadFile("/proc/self/statm")
	require.NoError(t, err)
	f := strings.Fields(string(data))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

func TestHostBackendReturnsMemoryToOS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	const size = 64 << 20
	h := memory.NewHostBackend(memory.TierHost)
	before := rssBytes(t)
	r, err := h.Alloc(size)
	require.NoError(t, err)
	for i := 0; i < size; i += 4096 {
		r.Host[i] = 1
	}
	touched := rssBytes(t)
	require.NoError(t, h.Free(r))
	after := rssBytes(t)
	assert.Greater(t, touched-before, int64(size*9/10), "touching the region makes it resident")
	assert.Greater(t, touched-after, int64(size*9/10), "freeing it gives it back to the OS at once")
}

func TestHostBackendInfo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/meminfo")
	}
	free, total, ok := memory.NewHostBackend(memory.TierHost).Info()
	require.True(t, ok)
	assert.Greater(t, total, int64(256*MiB))
	assert.Greater(t, free, int64(0))
	assert.LessOrEqual(t, free, total)
}
