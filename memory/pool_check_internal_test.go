package memory

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckExpandable: EnvMemoryCheck's rules hold for a pool in use and
// each kind of violation is named: a live block on a stale page, on an
// unmapped page, and one page mapped under two blocks in use.
func TestCheckExpandable(t *testing.T) {
	m := NewHostManager(Config{Segments: SegmentsExpandable})
	defer func() { require.NoError(t, m.Close()) }()
	p := m.pools[TierDevice]
	require.True(t, p.Expandable())
	a, err := m.Alloc(3<<20, RoleActivation)
	require.NoError(t, err)
	b, err := m.Alloc(5<<20, RoleActivation)
	require.NoError(t, err)
	require.NoError(t, p.checkExpandable())

	seg := a.b.seg
	i := int64(a.b.addr-seg.region.Addr) / p.page
	seg.x.stale = make([]bool, len(seg.x.pages))
	seg.x.stale[i] = true
	require.ErrorContains(t, p.checkExpandable(), "stale page")
	seg.x.stale[i] = false

	pg := seg.x.pages[i]
	seg.x.pages[i] = 0
	require.ErrorContains(t, p.checkExpandable(), "unmapped page")
	seg.x.pages[i] = pg

	j := int64(b.b.addr-seg.region.Addr)/p.page + 1 // a page only b covers
	other := seg.x.pages[j]
	seg.x.pages[j] = pg
	require.ErrorContains(t, p.checkExpandable(), "both in use")
	seg.x.pages[j] = other
	require.NoError(t, p.checkExpandable())
	require.NoError(t, m.Free(a))
	require.NoError(t, m.Free(b))
}

// TestHostPagesHaveIdentity: on Linux a host page mapped at two places is
// one memory, as on a GPU: a write through one address shows at the other.
func TestHostPagesHaveIdentity(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("page identity needs memfd (Linux)")
	}
	h := newHostBackend(TierDevice, "test").(*hostVM)
	r, err := h.ReserveAddress(2 * HostPageSize)
	require.NoError(t, err)
	pg, err := h.CreatePage()
	require.NoError(t, err)
	require.NoError(t, h.Map(r.Addr, []Page{pg}))
	require.NoError(t, h.Map(r.Addr+HostPageSize, []Page{pg}))
	r.Host[5] = 42
	require.Equal(t, byte(42), r.Host[HostPageSize+5], "the second mapping sees the first one's write")
	require.NoError(t, h.Unmap(r.Addr, []Page{pg}))
	require.Equal(t, byte(42), r.Host[HostPageSize+5], "the page outlives one of its mappings")
	require.NoError(t, h.Unmap(r.Addr+HostPageSize, []Page{pg}))
	require.NoError(t, h.ReleasePage(pg))
	require.Zero(t, h.file.fd, "the page file is closed with its last page")
	require.NoError(t, h.FreeAddress(r))
}
