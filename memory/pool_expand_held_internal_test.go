package memory

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdingSync is a lateSync that holds one stream (StreamHolder), as
// CUDAStreams holds a captured graph's private pool.
type holdingSync struct {
	*lateSync
	held Stream
}

func (h *holdingSync) Held(s Stream) bool { return s == h.held }

// TestExpandableStealSkipsHeld checks that an expandable pool at its limit
// takes no pages from the free blocks of a held stream: a captured graph's
// replays write the blocks freed during capture. The other stream's
// allocation fails instead; once the stream is released, its pages move.
func TestExpandableStealSkipsHeld(t *testing.T) {
	ss := &holdingSync{newLateSync(), 3}
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, StreamSync: ss, Limit: 64 << 20})
	g, err := p.Alloc(40<<20, ss.held)
	require.NoError(t, err)
	addr := g.addr
	require.NoError(t, p.Free(g))
	_, err = p.Alloc(40<<20, 1)
	require.True(t, errors.Is(err, ErrOutOfMemory), "the held stream's pages stay: %v", err)
	p.mu.Lock()
	require.Equal(t, int64(40<<20), segmentAt(p, addr).mapped, "the held stream's free block is still mapped")
	checkExpandable(t, p)
	p.mu.Unlock()

	ss.held = 0
	b, err := p.Alloc(40<<20, 1)
	require.NoError(t, err, "released, the stream gives its pages")
	p.mu.Lock()
	checkBlockMapped(t, p, b, 40<<20, "after release")
	checkExpandable(t, p)
	p.mu.Unlock()
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Close())
}

// syncCountVM is a VirtualMemory that counts Sync calls and fails them
// while forbid is set, as a device capturing a CUDA graph refuses them.
type syncCountVM struct {
	VirtualMemory
	syncs  int
	forbid bool
}

func (v *syncCountVM) Sync() error {
	v.syncs++
	if v.forbid {
		return errors.New("synchronised while capturing")
	}
	return v.VirtualMemory.Sync()
}

// TestExpandableHeldGrowsWithoutSync checks that a held stream's range (a
// CUDA graph's private pool, growing while its graph is captured) takes
// pages from its own free blocks or creates them, and never steals from
// another stream's free pages or sweeps stale ranges, which would
// synchronise the device: another stream's 40 MiB of free pages stay where
// they are while the held stream grows by more than that.
func TestExpandableHeldGrowsWithoutSync(t *testing.T) {
	vm := &syncCountVM{VirtualMemory: NewHostBackend(TierDevice).(VirtualMemory)}
	ss := &holdingSync{newLateSync(), 3}
	p := NewPool(vm, PoolConfig{Expandable: true, StreamSync: ss})
	b, err := p.Alloc(40<<20, 1)
	require.NoError(t, err)
	other := b.addr
	require.NoError(t, p.Free(b))

	vm.forbid = true
	var live []*Block
	for i, n := range []int64{8 << 20, 8 << 20, 3 << 20, 12 << 20, 30 << 20, 5 << 20} {
		g, err := p.Alloc(n, ss.held)
		require.NoError(t, err, "allocation %d of the held stream", i)
		live = append(live, g)
		if i == 2 { // a free block in its own range, whose pages it lends
			require.NoError(t, p.Free(live[0]))
			live = live[1:]
		}
	}
	require.Zero(t, vm.syncs, "the held stream's growth synchronised")
	p.mu.Lock()
	require.Equal(t, int64(40<<20), segmentAt(p, other).mapped, "the other stream's free pages stayed mapped there")
	checkExpandable(t, p)
	p.mu.Unlock()

	vm.forbid, ss.held = false, 0
	for _, g := range live {
		require.NoError(t, p.Free(g))
	}
	g, err := p.Alloc(64<<20, 1)
	require.NoError(t, err, "released, the stream's pages serve others")
	require.NoError(t, p.Free(g))
	require.NoError(t, p.Close())
}

// TestExpandableHeldKeepsStale: the address of a block a held stream freed
// and whose pages it lent to a later block (a graph's capture) stays
// mapped while the stream is held, through EmptyCache and other streams'
// growth, since the graph's replays write there; once the stream is held
// no more, the manager's EmptyStreamCache gives its pages back and sweeps
// it, other streams' cache untouched.
func TestExpandableHeldKeepsStale(t *testing.T) {
	ss := &holdingSync{newLateSync(), 3}
	m := NewHostManager(Config{StreamSync: ss, Segments: SegmentsExpandable})
	p := m.pools[TierDevice]
	require.NotNil(t, p.vm)
	const mib = 1 << 20
	a, err := m.AllocStream(8*mib, RoleActivation, ss.held)
	require.NoError(t, err)
	c, err := m.AllocStream(8*mib, RoleActivation, ss.held)
	require.NoError(t, err)
	old := a.Addr()
	require.NoError(t, a.Free())
	d, err := m.AllocStream(12*mib, RoleActivation, ss.held)
	require.NoError(t, err)
	p.mu.Lock()
	seg := segmentAt(p, old)
	require.Positive(t, seg.x.staleBytes, "the freed block's pages were lent to the later one")
	stale := seg.x.staleBytes
	p.mu.Unlock()

	other, err := m.AllocStream(20*mib, RoleActivation, 1) // another stream's cache
	require.NoError(t, err)
	require.NoError(t, other.Free())
	require.NoError(t, m.EmptyCache())
	big, err := m.AllocStream(30*mib, RoleActivation, 1)
	require.NoError(t, err)
	p.mu.Lock()
	require.Equal(t, stale, seg.x.staleBytes, "held: its stale range is not swept")
	require.NotZero(t, seg.x.pages[int64(old-seg.region.Addr)/p.page], "held: the freed block's address is still mapped")
	checkExpandable(t, p)
	p.mu.Unlock()
	// The replays' writes through the old address land in the page the
	// later block holds now (one memory, as on a GPU).
	seg.region.Host[old-seg.region.Addr] = 42
	found := false
	for _, v := range d.Host() {
		found = found || v == 42
	}
	require.True(t, found, "the old address and the later block share the lent page")

	require.NoError(t, c.Free())
	require.NoError(t, d.Free())
	ss.held = 0 // the graph is released
	cached := m.Stats().Tiers[TierDevice].Reserved.Current
	require.NoError(t, m.EmptyStreamCache(3))
	p.mu.Lock()
	require.Zero(t, seg.x.staleBytes, "released: swept")
	checkExpandable(t, p)
	p.mu.Unlock()
	require.Less(t, m.Stats().Tiers[TierDevice].Reserved.Current, cached, "the stream's pages given back")
	require.NoError(t, big.Free())
	require.NoError(t, m.Close())
}
