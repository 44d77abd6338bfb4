package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFreeIndexHotSlot checks the index's hot slot (the block inserted
// last, held outside the classes): take returns it only when no class
// holds a better key, never for another stream, and delete, Len and
// ascend see it like any other block.
func TestFreeIndexHotSlot(t *testing.T) {
	var x freeIndex
	a := &Block{seg: testSegs[0], size: 8 << 10, addr: 0x1000}
	b := &Block{seg: testSegs[0], size: 4 << 10, addr: 0x9000}
	e := &Block{seg: testSegs[0], size: 4 << 10, addr: 0xa000}
	f := &Block{seg: testSegs[1], size: 4 << 10, addr: 0x2000}
	any := freeKey{size: 1 << 62}

	x.insert(0, a)
	x.insert(0, b)
	require.Same(t, b, x.hot, "the block inserted last is hot")
	require.Equal(t, 2, x.Len())
	require.True(t, x.first.has(sizeClass(a.size)), "the block hot before went to its class")
	require.Same(t, b, x.take(0, freeKey{size: 4 << 10}, any), "the hot block is the best fit")
	require.Nil(t, x.hot)
	require.Equal(t, 1, x.Len())

	// A class block beats the hot one: same size, lower address.
	x.insert(0, b)
	x.insert(0, e)
	require.Same(t, e, x.hot)
	require.Same(t, b, x.take(0, freeKey{size: 4 << 10}, any), "lowest address among equal sizes, though not hot")
	require.Same(t, e, x.hot, "the hot block stays")
	// A smaller class block beats it too; one that does not fit does not.
	// That insert is the second in a row to evict an unused hot block: the
	// slot is emptied and bypassed for a while.
	x.insert(0, &Block{seg: testSegs[0], size: 6 << 10, addr: 0x20000})
	require.Nil(t, x.hot, "bypassed after two unused hot blocks")
	require.Equal(t, hotBypass, x.bypass)
	require.Equal(t, 3, x.Len())
	checkFreeIndexKeepHot(t, &x)
	require.Equal(t, int64(6<<10), x.take(0, freeKey{size: 5 << 10}, any).size)
	require.Same(t, a, x.take(0, freeKey{size: 5 << 10}, any), "the hot block is too small")
	// hi is exclusive, for the hot block as for the others.
	require.Nil(t, x.take(0, freeKey{size: 4 << 10}, freeKey{size: 4 << 10, addr: 0xa000}))
	require.Same(t, e, x.take(0, freeKey{size: 4 << 10}, freeKey{size: 4 << 10, addr: 0xa001}))
	require.Zero(t, x.Len())

	// Streams: a hot block of stream 1 is not taken for stream 0.
	x.bypass = 0
	x.insert(0, b)
	x.insert(1, f)
	require.Same(t, f, x.hot)
	require.Same(t, b, x.take(0, freeKey{size: 512}, any))
	require.Nil(t, x.take(0, freeKey{size: 512}, any))
	require.False(t, x.delete(0, f), "the hot block is stream 1's")
	require.True(t, x.delete(1, f))
	require.False(t, x.delete(1, f), "deleted twice")
	require.Zero(t, x.Len())

	// ascend lists the hot block in key order with the others.
	x.evicted = 0
	x.insert(0, e)
	x.insert(0, a)
	x.insert(0, b)
	checkFreeIndex(t, &x, []*Block{b, e, a})
	require.Same(t, b, x.take(0, freeKey{size: 512}, any))
}

// hotTestBackend hands out address ranges with nothing behind them
// (memtest's AddressBackend, which this package's tests cannot import).
type hotTestBackend struct{ next uintptr }

func (a *hotTestBackend) Name() string { return "hot-test" }
func (a *hotTestBackend) Tier() Tier   { return TierDevice }
func (a *hotTestBackend) Alloc(size int64) (Region, error) {
	if a.next == 0 {
		a.next = 1 << 44
	}
	r := Region{Addr: a.next, Size: size}
	a.next += uintptr(size)
	return r, nil
}
func (a *hotTestBackend) Free(Region) error                  { return nil }
func (a *hotTestBackend) Info() (free, total int64, ok bool) { return 0, 0, false }

// hotTestSync is a StreamSync whose events complete when told to.
type hotTestSync struct{ done bool }

func (f *hotTestSync) RecordEvent(Stream) (StreamEvent, error) { return 1, nil }
func (f *hotTestSync) Done(StreamEvent) bool                   { return f.done }
func (f *hotTestSync) Wait(StreamEvent) error                  { f.done = true; return nil }
func (f *hotTestSync) Release(StreamEvent)                     {}

// checkFreeIndexKeepHot checks that every class block is in its class and
// marked, without moving the hot block (ascend would).
func checkFreeIndexKeepHot(t *testing.T, x *freeIndex) {
	t.Helper()
	n := 0
	if x.hot != nil {
		n++
	}
	cs := &x.first
	for c := range cs.ones {
		if cs.has(c) {
			cs.ascendClass(c, func(b *Block) bool {
				require.Equal(t, c, sizeClass(b.size))
				n++
				return true
			})
		}
	}
	require.Equal(t, x.Len(), n)
}

// fresh restarts the count of unused hot blocks, so that a test sees the
// slot at work rather than bypassed.
func fresh(p *Pool) { p.small.evicted, p.small.bypass = 0, 0 }

// newHotTestPool is a classic pool over address ranges.
func newHotTestPool() *Pool { return NewPool(&hotTestBackend{}, PoolConfig{}) }

// TestPoolHotPair checks the warm pair the hot slot is for: a block split
// off a free segment and freed again merges back into the whole segment,
// which sits hot (no class touched) and serves the next request at the
// same address; snapshots, EmptyCache and the statistics see it.
func TestPoolHotPair(t *testing.T) {
	p := newHotTestPool()
	var addr uintptr
	for i := range 5 {
		b, err := p.Alloc(4<<10, 0)
		require.NoError(t, err)
		if i == 0 {
			addr = b.Addr()
		}
		require.Equal(t, addr, b.Addr(), "pair %d: the same block each time", i)
		require.NotNil(t, p.small.hot, "the split's rest is hot")
		require.Equal(t, int64(2<<20-4<<10), p.small.hot.size)
		require.NoError(t, p.Free(b))
		h := p.small.hot
		require.NotNil(t, h, "the merged segment is hot")
		require.Equal(t, addr, h.addr)
		require.Equal(t, int64(SmallBuffer), h.size)
		require.Equal(t, 1, p.small.Len())
		require.Zero(t, p.small.first.summary, "no class holds a block")
	}
	st := p.Stats()
	assert.Equal(t, int64(1), st.BackendAllocs)
	assert.Zero(t, st.Allocated.Current)
	assert.Zero(t, st.InactiveSplit.Current)
	segs := p.Segments()
	require.Len(t, segs, 1)
	require.Len(t, segs[0].Blocks, 1, "coalesced")
	assert.False(t, segs[0].Blocks[0].Live)
	assert.Equal(t, int64(SmallBuffer), segs[0].Blocks[0].Size)

	// EmptyCache finds the hot block and gives its segment back.
	require.NoError(t, p.EmptyCache())
	assert.Nil(t, p.small.hot)
	assert.Zero(t, p.small.Len())
	assert.Zero(t, p.Stats().Reserved.Current)
	require.NoError(t, p.Close())
}

// TestPoolHotMerges checks frees next to a hot block: the hot block is
// found and merged, on either side, and the merged block becomes hot.
func TestPoolHotMerges(t *testing.T) {
	p := newHotTestPool()
	x, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	y, err := p.Alloc(8<<10, 0)
	require.NoError(t, err)
	z, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(x)) // between nothing and live y: hot alone
	require.Same(t, x, p.small.hot)
	fresh(p)
	require.NoError(t, p.Free(z)) // merges with the segment's rest; x leaves the slot
	require.Equal(t, int64(2<<20-12<<10), p.small.hot.size)
	require.Equal(t, 2, p.small.Len())
	require.NoError(t, p.Free(y)) // merges with x (in a class) and the rest (hot)
	require.Equal(t, 1, p.small.Len())
	require.Equal(t, int64(SmallBuffer), p.small.hot.size)
	segs := p.Segments()
	require.Len(t, segs, 1)
	require.Len(t, segs[0].Blocks, 1)
	require.NoError(t, p.Close())
}

// TestPoolHotBestFit checks that the hot block is not handed out when a
// cached block fits better: the freed block that is hot is larger, or
// equal but higher.
func TestPoolHotBestFit(t *testing.T) {
	p := newHotTestPool()
	var blocks []*Block
	for _, size := range []int64{4 << 10, 512, 8 << 10, 512, 4 << 10, 512} {
		b, err := p.Alloc(size, 0)
		require.NoError(t, err)
		blocks = append(blocks, b)
	}
	low, big, high := blocks[0], blocks[2], blocks[4]
	lowAddr, bigAddr, highAddr := low.addr, big.addr, high.addr
	require.NoError(t, p.Free(low))
	fresh(p)
	require.NoError(t, p.Free(high))
	require.Same(t, high, p.small.hot)
	b, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, lowAddr, b.addr, "equal sizes: the lower address, not the hot block")
	fresh(p)
	require.NoError(t, p.Free(big))
	require.Equal(t, bigAddr, p.small.hot.addr)
	b, err = p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, highAddr, b.addr, "4 KiB fits best in the 4 KiB hole, not the hot 8 KiB one")
	b, err = p.Alloc(6<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, bigAddr, b.addr, "the hot block when it is the best fit")
	require.ErrorIs(t, p.Close(), ErrLeaked)
}

// TestPoolHotStreams checks that a block hot for one stream is not
// handed to another, and that an allocation after it takes the block
// cached for its own stream.
func TestPoolHotStreams(t *testing.T) {
	p := newHotTestPool()
	a, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	b, err := p.Alloc(4<<10, 1)
	require.NoError(t, err)
	aAddr := a.addr
	require.NoError(t, p.Free(a))
	fresh(p)
	require.NoError(t, p.Free(b))
	require.Equal(t, Stream(1), p.small.hotStream)
	c, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, aAddr, c.addr, "stream 0 gets its own segment's block")
	assert.Equal(t, Stream(0), c.Stream())
	assert.Equal(t, int64(2), p.Stats().BackendAllocs)
	require.NoError(t, p.Free(c))
	require.NoError(t, p.Close())
}

// TestPoolHotPending checks a block freed after use on another stream: it
// joins the index (and the hot slot) only once the stream's work is done.
func TestPoolHotPending(t *testing.T) {
	ss := &hotTestSync{}
	p := NewPool(&hotTestBackend{}, PoolConfig{StreamSync: ss})
	a, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	aAddr := a.addr
	require.NoError(t, p.RecordStream(a, 7))
	require.NoError(t, p.Free(a))
	require.NotNil(t, p.small.hot, "the segment's rest")
	require.Equal(t, int64(2<<20-4<<10), p.small.hot.size, "the pending block is not in the index")
	require.Equal(t, 1, p.small.Len())
	b, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.NotEqual(t, aAddr, b.addr, "not reused while pending")
	require.NoError(t, p.Free(b))
	ss.done = true
	c, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, aAddr, c.addr, "reused once the event completed")
	require.NoError(t, p.Free(c))
	require.Equal(t, 1, p.small.Len())
	require.Equal(t, int64(SmallBuffer), p.small.hot.size, "all merged, hot")
	assert.Equal(t, int64(1), p.Stats().BackendAllocs)
	require.NoError(t, p.Close())
}

// TestPoolHotBypass checks the bypass on a workload whose hot blocks go
// unused: the slot empties into the classes, later inserts skip it, and a
// pair that uses it again refills it once the bypass has run out.
func TestPoolHotBypass(t *testing.T) {
	p := newHotTestPool()
	var live []*Block
	for range 8 { // 4 KiB blocks with live 512 B ones between them
		a, err := p.Alloc(4<<10, 0)
		require.NoError(t, err)
		_, err = p.Alloc(512, 0)
		require.NoError(t, err)
		live = append(live, a)
	}
	fresh(p)
	for _, a := range live { // each free evicts the block freed before
		require.NoError(t, p.Free(a))
	}
	require.Nil(t, p.small.hot, "bypassed")
	require.Equal(t, 9, p.small.Len(), "8 holes and the segment's rest")
	checkFreeIndexKeepHot(t, &p.small)
	require.Equal(t, hotBypass-(len(live)-hotMisses), p.small.bypass)
	// Best fit is unchanged meanwhile: the lowest hole first.
	b, err := p.Alloc(4<<10, 0)
	require.NoError(t, err)
	assert.Equal(t, live[0].addr, b.addr)
	p.small.bypass = 0
	require.NoError(t, p.Free(b))
	require.Same(t, b, p.small.hot, "the slot is used again")
	require.ErrorIs(t, p.Close(), ErrLeaked)
}
