package memtest

import (
	"sort"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// impossibleSize is more than any machine maps (beyond a 57-bit address
// space), so every backend must refuse it as out of memory.
const impossibleSize = 1 << 60

// conformanceSizes go from one byte to more than a large segment, with odd
// sizes that are no multiple of a page or of 512.
var conformanceSizes = []int64{1, 511, 512, 4096, 65537, 1 << 20, 2 << 20, 20<<20 + 3}

// RunBackend runs the conformance suite on backends made by newBackend,
// one fresh backend per subtest. Every memory.Backend must pass it.
func RunBackend(t *testing.T, newBackend func() memory.Backend) {
	t.Helper()
	t.Run("identity", func(t *testing.T) {
		b := newBackend()
		require.NotEmpty(t, b.Name(), "a backend needs a name for summaries and errors")
		require.Less(t, b.Tier(), memory.NumTiers, "tier out of range")
		require.Equal(t, b.Tier(), b.Tier())
	})
	t.Run("sizes", func(t *testing.T) { testSizes(t, newBackend()) })
	t.Run("no-overlap", func(t *testing.T) { testNoOverlap(t, newBackend()) })
	t.Run("invalid-size", func(t *testing.T) {
		b := newBackend()
		for _, n := range []int64{0, -1, -4096} {
			r, err := b.Alloc(n)
			require.ErrorIs(t, err, memory.ErrInvalidArgument, "Alloc(%d)", n)
			require.Zero(t, r.Addr)
		}
	})
	t.Run("out-of-memory", func(t *testing.T) {
		r, err := newBackend().Alloc(impossibleSize)
		require.ErrorIs(t, err, memory.ErrOutOfMemory, "Alloc(1 EiB)")
		require.Zero(t, r.Addr)
	})
	t.Run("double-free", func(t *testing.T) {
		b := newBackend()
		r, err := b.Alloc(4096)
		require.NoError(t, err)
		require.NoError(t, b.Free(r))
		require.ErrorIs(t, b.Free(r), memory.ErrDoubleFree, "second Free of the same region")
	})
	t.Run("info", func(t *testing.T) {
		free, total, ok := newBackend().Info()
		if !ok {
			t.Skip("backend cannot tell free and total bytes")
		}
		require.Positive(t, total)
		require.GreaterOrEqual(t, free, int64(0))
		require.LessOrEqual(t, free, total)
	})
	t.Run("pool", func(t *testing.T) { testPool(t, newBackend()) })
}

func testSizes(t *testing.T, b memory.Backend) {
	for _, n := range conformanceSizes {
		r, err := b.Alloc(n)
		require.NoError(t, err, "Alloc(%d)", n)
		require.Equal(t, n, r.Size, "region size for Alloc(%d)", n)
		require.NotZero(t, r.Addr, "region address for Alloc(%d)", n)
		if r.Host != nil {
			require.Len(t, r.Host, int(n), "host view for Alloc(%d)", n)
			require.Equal(t, r.Addr, uintptr(unsafe.Pointer(&r.Host[0])), "host view must start at Addr for Alloc(%d)", n)
			Fill(r.Host, byte(n))
			require.NoError(t, Check(r.Host, byte(n)), "Alloc(%d)", n)
		}
		require.NoError(t, b.Free(r), "Free of Alloc(%d)", n)
	}
}

func testNoOverlap(t *testing.T, b memory.Backend) {
	const count = 48
	regions := make([]memory.Region, 0, count)
	for i := range count {
		n := int64(1+i*977) << (i % 5)
		r, err := b.Alloc(n)
		require.NoError(t, err, "Alloc(%d)", n)
		if r.Host != nil {
			Fill(r.Host, byte(i))
		}
		regions = append(regions, r)
	}
	sorted := append([]memory.Region(nil), regions...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Addr < sorted[j].Addr })
	for i := 1; i < len(sorted); i++ {
		prev, cur := sorted[i-1], sorted[i]
		require.LessOrEqual(t, prev.Addr+uintptr(prev.Size), cur.Addr,
			"regions [%#x,+%d) and [%#x,+%d) overlap", prev.Addr, prev.Size, cur.Addr, cur.Size)
	}
	for i, r := range regions {
		if r.Host != nil {
			require.NoError(t, Check(r.Host, byte(i)), "region %d of %d bytes was overwritten", i, r.Size)
		}
	}
	for _, r := range regions {
		require.NoError(t, b.Free(r))
	}
}

func testPool(t *testing.T, up memory.Backend) {
	fb := NewFaultBackend(up, 0)
	p := memory.NewPool(fb, memory.PoolConfig{})
	var blocks []*memory.Block
	for i, n := range conformanceSizes {
		blk, err := p.Alloc(n, 0)
		require.NoError(t, err, "pool Alloc(%d)", n)
		require.Equal(t, n, blk.Size())
		if h := blk.Host(); h != nil {
			require.Len(t, h, int(n))
			Fill(h, byte(i))
		}
		blocks = append(blocks, blk)
	}
	for i, blk := range blocks {
		if h := blk.Host(); h != nil {
			require.NoError(t, Check(h, byte(i)), "pool block of %d bytes was overwritten", blk.Size())
		}
		require.NoError(t, p.Free(blk))
	}
	require.NoError(t, p.EmptyCache())
	require.Zero(t, p.Stats().Reserved.Current)
	regions, bytes := fb.Live()
	require.Zero(t, regions, "regions still live after EmptyCache")
	require.Zero(t, bytes)
	require.NoError(t, p.Close())
}
