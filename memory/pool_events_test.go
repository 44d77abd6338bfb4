package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// newSyncPool returns a pool over device-like address ranges whose
// cross-stream use is tracked by a fake StreamSync.
func newSyncPool(t testing.TB, cfg memory.PoolConfig) (*memory.Pool, *memtest.FaultBackend, *memtest.StreamSync) {
	t.Helper()
	ss := memtest.NewStreamSync()
	cfg.StreamSync = ss
	fb := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<40), 0)
	return memory.NewPool(fb, cfg), fb, ss
}

// closeSynced closes p, checks that every region went back to the backend
// and that every event token was released exactly once.
func closeSynced(t testing.TB, p *memory.Pool, fb *memtest.FaultBackend, ss *memtest.StreamSync) {
	t.Helper()
	closeClean(t, p, fb)
	require.NoError(t, ss.Err(), "StreamSync protocol")
	require.Zero(t, ss.Outstanding(), "event tokens not released")
}

// blockState finds the block at addr in the pool's snapshot.
func blockState(t testing.TB, p *memory.Pool, addr uintptr) memory.BlockInfo {
	t.Helper()
	for _, s := range p.Segments() {
		for _, b := range s.Blocks {
			if b.Addr == addr {
				return b
			}
		}
	}
	t.Fatalf("no block at %#x", addr)
	return memory.BlockInfo{}
}

func TestRecordStreamDefersReuse(t *testing.T) {
	const s1, s2 = memory.Stream(1), memory.Stream(2)
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 4*KiB, s1)
	addr := a.Addr()
	require.NoError(t, p.RecordStream(a, s2))
	require.NoError(t, p.RecordStream(a, s2), "recording a stream twice is harmless")
	require.NoError(t, p.Free(a))
	assert.Equal(t, 1, ss.Calls().Records, "one event, on s2")

	st := p.Stats()
	assert.Zero(t, st.Allocated.Current, "a freed block is not allocated")
	assert.Equal(t, 4*KiB, st.Active.Current, "but stays active while s2 may use it")
	assert.Equal(t, memory.BlockInfo{Addr: addr, Size: 4 * KiB, Pending: true}, blockState(t, p, addr))

	b := mustAlloc(t, p, 4*KiB, s1)
	assert.NotEqual(t, addr, b.Addr(), "the block must not be handed out while s2's work may still use it")
	assert.Equal(t, 8*KiB, p.Stats().Active.Current)

	ss.Complete(s2)
	c := mustAlloc(t, p, 4*KiB, s1)
	assert.Equal(t, addr, c.Addr(), "once s2's work is done the block is reused")
	st = p.Stats()
	assert.Equal(t, st.Allocated, st.Active, "nothing pending any more")
	assert.Equal(t, memtest.StreamSyncCalls{Records: 1, Queries: 2, Releases: 1}, ss.Calls())
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(c))
	closeSynced(t, p, fb, ss)
}

func TestRecordStreamOwnStreamIsFree(t *testing.T) {
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 4*KiB, 3)
	require.NoError(t, p.RecordStream(a, 3))
	addr := a.Addr()
	require.NoError(t, p.Free(a))
	b := mustAlloc(t, p, 4*KiB, 3)
	assert.Equal(t, addr, b.Addr(), "use on the block's own stream needs no event")
	assert.Zero(t, ss.Calls(), "the host path never touches the StreamSync")
	require.NoError(t, p.Free(b))
	closeSynced(t, p, fb, ss)
}

func TestRecordStreamErrors(t *testing.T) {
	p, fb := newAddrPool(t, memory.PoolConfig{}, 0)
	a := mustAlloc(t, p, 4*KiB, 0)
	require.NoError(t, p.RecordStream(a, 0), "the own stream needs no StreamSync")
	err := p.RecordStream(a, 7)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "no StreamSync")
	require.ErrorIs(t, p.RecordStream(nil, 7), memory.ErrInvalidArgument)
	require.NoError(t, p.Free(a))
	require.ErrorIs(t, p.RecordStream(a, 0), memory.ErrDoubleFree, "a freed block")
	other, ofb := newAddrPool(t, memory.PoolConfig{}, 0)
	b := mustAlloc(t, other, 4*KiB, 0)
	require.ErrorIs(t, p.RecordStream(b, 0), memory.ErrDoubleFree, "a block of another pool")
	require.NoError(t, other.Free(b))
	closeClean(t, other, ofb)
	closeClean(t, p, fb)
	require.ErrorIs(t, p.RecordStream(b, 0), memory.ErrDoubleFree)
}

func TestRecordStreamQueriesOncePerStream(t *testing.T) {
	const own, user = memory.Stream(1), memory.Stream(2)
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	var addrs []uintptr
	for range 10 {
		a := mustAlloc(t, p, 64*KiB, own)
		require.NoError(t, p.RecordStream(a, user))
		addrs = append(addrs, a.Addr())
		require.NoError(t, p.Free(a))
	}
	before := ss.Calls().Queries
	x := mustAlloc(t, p, 512, own)
	assert.Equal(t, 1, ss.Calls().Queries-before,
		"events of one stream complete in order: one query for the oldest answers for all ten")
	for _, a := range addrs {
		assert.True(t, blockState(t, p, a).Pending)
	}
	ss.Complete(user)
	require.NoError(t, p.Free(x))
	y := mustAlloc(t, p, 512, own)
	assert.Equal(t, 10, ss.Calls().Releases, "one pass reclaims every finished block")
	segs := p.Segments()
	require.Len(t, segs, 1)
	assert.Len(t, segs[0].Blocks, 2, "the reclaimed blocks coalesced: one live block and one free rest")
	require.NoError(t, p.Free(y))
	closeSynced(t, p, fb, ss)
}

func TestRecordStreamSeveralStreams(t *testing.T) {
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 4*KiB, 1)
	addr := a.Addr()
	require.NoError(t, p.RecordStream(a, 2))
	require.NoError(t, p.RecordStream(a, 3))
	require.NoError(t, p.Free(a))
	ss.Complete(2)
	b := mustAlloc(t, p, 4*KiB, 1)
	assert.NotEqual(t, addr, b.Addr(), "stream 3 may still use it")
	assert.True(t, blockState(t, p, addr).Pending)
	ss.Complete(3)
	c := mustAlloc(t, p, 4*KiB, 1)
	assert.Equal(t, addr, c.Addr())
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(c))
	closeSynced(t, p, fb, ss)
}

// hostWaits is a StreamSync that cannot make a stream wait on the device
// (no memory.StreamWaiter): pools wait on the host instead.
type hostWaits struct{ memory.StreamSync }

func TestRecordStreamWaitsBeforeOOM(t *testing.T) {
	// With a StreamWaiter the pool reuses the block at once and stream 1
	// waits for stream 2 on the device (TestPoolReclaimOnStream); here the
	// host waits.
	ss := memtest.NewStreamSync()
	fb := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<40), 0)
	p := memory.NewPool(fb, memory.PoolConfig{Limit: 2 * MiB, StreamSync: hostWaits{ss}})
	a := mustAlloc(t, p, MiB, 1)
	b := mustAlloc(t, p, MiB, 1) // the other half of the one small segment
	addr := a.Addr()
	require.NoError(t, p.RecordStream(a, 2))
	require.NoError(t, p.Free(a))
	// No free block fits and the limit forbids a second segment, so the
	// pool waits for stream 2 rather than fail, and reuses a's block.
	c := mustAlloc(t, p, MiB, 1)
	assert.Equal(t, addr, c.Addr())
	calls := ss.Calls()
	assert.Equal(t, 1, calls.Waits)
	assert.Equal(t, 1, calls.Releases)
	st := p.Stats()
	assert.Equal(t, int64(1), st.BackendAllocs, "no second segment")
	assert.Zero(t, st.OOMs)
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(c))
	closeSynced(t, p, fb, ss)
}

func TestRecordStreamEmptyCacheWaits(t *testing.T) {
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 12*MiB, 1)
	require.NoError(t, p.RecordStream(a, 2))
	require.NoError(t, p.Free(a))
	require.NoError(t, p.EmptyCache())
	st := p.Stats()
	assert.Zero(t, st.Reserved.Current, "EmptyCache waits for the pending block, then releases its segment")
	assert.Zero(t, st.Active.Current)
	assert.Equal(t, 1, ss.Calls().Waits)
	closeSynced(t, p, fb, ss)
}

func TestRecordStreamCloseWaits(t *testing.T) {
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 3*MiB, 1)
	require.NoError(t, p.RecordStream(a, 2))
	require.NoError(t, p.Free(a))
	assert.Equal(t, 3*MiB, p.Stats().Active.Current)
	closeSynced(t, p, fb, ss)
	assert.Equal(t, 1, ss.Calls().Waits, "memory goes back to the backend only after the work using it is done")
	assert.Zero(t, p.Stats().Active.Current)
}

func TestRecordStreamFailedEventQuarantines(t *testing.T) {
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 4*KiB, 1)
	addr := a.Addr()
	require.NoError(t, p.RecordStream(a, 2))
	ss.FailNext(1)
	err := p.Free(a)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stays out of use until Close")
	require.ErrorIs(t, p.Free(a), memory.ErrDoubleFree, "the block was freed all the same")
	ss.CompleteAll()
	b := mustAlloc(t, p, 4*KiB, 1)
	assert.NotEqual(t, addr, b.Addr(), "a block whose use could not be tracked is never reused")
	require.NoError(t, p.EmptyCache())
	assert.True(t, blockState(t, p, addr).Pending)
	require.NoError(t, p.Free(b))
	closeSynced(t, p, fb, ss)
}

func TestManagerRecordStream(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	assert.Equal(t, memory.StreamSync(ss), m.StreamSync())
	a, err := m.AllocStream(100*KiB, memory.RoleActivation, 1)
	require.NoError(t, err)
	require.NoError(t, m.RecordStream(a, 2))
	require.NoError(t, a.Free())
	s := m.Stats()
	for _, u := range []memory.Usage{s.Total, s.Tiers[memory.TierDevice]} {
		assert.Zero(t, u.Allocated.Current)
		assert.Equal(t, 100*KiB, u.Active.Current, "active = allocated + blocks waiting on events")
	}
	assert.Zero(t, s.Roles[memory.RoleActivation].Allocated.Current, "the role's bytes are freed")
	require.ErrorIs(t, m.RecordStream(a, 2), memory.ErrDoubleFree)
	require.ErrorIs(t, m.RecordStream(nil, 2), memory.ErrInvalidArgument)
	ss.CompleteAll()
	require.NoError(t, m.EmptyCache())
	assert.Zero(t, m.Stats().Total.Active.Current)
	require.NoError(t, m.Close())
	require.ErrorIs(t, m.RecordStream(a, 2), memory.ErrClosed)
	require.NoError(t, ss.Err())
	require.Zero(t, ss.Outstanding())

	host := memory.NewHostManager(memory.Config{})
	b, err := host.AllocStream(KiB, memory.RoleActivation, 1)
	require.NoError(t, err)
	require.ErrorIs(t, host.RecordStream(b, 2), memory.ErrInvalidArgument, "no StreamSync on a plain host manager")
	require.NoError(t, b.Free())
	require.NoError(t, host.Close())
}

// TestPoolReclaimOnStream: at its limit, a pool reuses a block of the
// allocating stream that waits for another stream's work by making the
// allocating stream wait for that work on the device (StreamWaiter), not
// the host; without a fit among such blocks it waits on the host as
// before.
func TestPoolReclaimOnStream(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		t.Run(map[memory.SegmentMode]string{memory.SegmentsClassic: "classic", memory.SegmentsExpandable: "expandable"}[mode], func(t *testing.T) {
			testPoolReclaimOnStream(t, mode)
		})
	}
}

func testPoolReclaimOnStream(t *testing.T, mode memory.SegmentMode) {
	ss := memtest.NewStreamSync()
	var limits [memory.NumTiers]int64
	limits[memory.TierDevice] = 20 << 20 // one request's segment, not two
	m := memory.NewHostManager(memory.Config{StreamSync: ss, Limits: limits, Segments: mode})
	const compute, copier memory.Stream = 1, 2
	a, err := m.AllocStream(12<<20, memory.RoleActivation, compute)
	require.NoError(t, err)
	addr := a.Addr()
	require.NoError(t, m.RecordStream(a, copier)) // a copy still reads it
	require.NoError(t, a.Free())
	b, err := m.AllocStream(12<<20, memory.RoleActivation, compute)
	require.NoError(t, err, "the pending block is reused")
	assert.Equal(t, addr, b.Addr())
	c := ss.Calls()
	assert.Equal(t, 1, c.StreamWaits, "the compute stream waits for the copy on the device")
	assert.Zero(t, c.Waits, "the host does not wait")
	assert.LessOrEqual(t, m.Stats().Tiers[memory.TierDevice].Reserved.Current, limits[memory.TierDevice], "within the limit")

	// A block of another stream's segments is not taken that way: the
	// host waits for it instead, and the pool releases it to make room.
	require.NoError(t, b.Free())
	d, err := m.AllocStream(12<<20, memory.RoleActivation, copier)
	require.NoError(t, err)
	require.NoError(t, m.RecordStream(d, compute))
	require.NoError(t, d.Free())
	e, err := m.AllocStream(12<<20, memory.RoleActivation, compute)
	require.NoError(t, err)
	assert.Equal(t, 1, ss.Calls().StreamWaits, "no stream wait for another stream's segment")
	assert.Positive(t, ss.Calls().Waits, "the host waited for it")
	require.NoError(t, e.Free())
	ss.CompleteAll()
	require.NoError(t, m.Close())
	require.NoError(t, ss.Err())
	require.Zero(t, ss.Outstanding())
}
