package memory_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

func TestHistoryRecordsAllocsFreesAndSegments(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer m.Close()
	assert.Nil(t, m.History(), "nothing recorded yet")
	before, err := m.Alloc(1000, memory.RoleParameter) // before the recording
	require.NoError(t, err)

	m.RecordHistory(0)
	m.MarkHistory("step 1")
	a, err := m.AllocOp(3<<20, memory.RoleActivation, 0, "matmul")
	require.NoError(t, err)
	assert.Equal(t, "matmul", a.Op())
	g, err := m.AllocOp(100, memory.RoleGradient, 0, "add")
	require.NoError(t, err)
	require.NoError(t, a.Free())
	require.NoError(t, before.Free())
	snap := m.Snapshot()
	require.NoError(t, m.EmptyCache())

	h := m.History()
	require.NotNil(t, h)
	assert.Zero(t, h.Dropped)
	assert.Equal(t, int64(1024), h.Before[memory.TierDevice].Allocated[memory.RoleParameter], "the parameter's block, rounded to 1 KiB, live before")
	assert.Equal(t, int64(1000), h.Before[memory.TierDevice].Requested[memory.RoleParameter])
	assert.Equal(t, int64(memory.SmallBuffer), h.Before[memory.TierDevice].Reserved)

	var kinds []string
	for i, e := range h.Events {
		kinds = append(kinds, e.Kind.String())
		if i > 0 {
			assert.Equal(t, h.Events[i-1].Seq+1, e.Seq)
			assert.GreaterOrEqual(t, e.Time, h.Events[i-1].Time)
		}
	}
	assert.Equal(t, []string{"mark", "reserve", "alloc", "alloc", "free", "free", "release"}, kinds, "the small segment keeps the gradient")
	mark, seg, allocA, allocG, freeA, freeBefore := h.Events[0], h.Events[1], h.Events[2], h.Events[3], h.Events[4], h.Events[5]
	assert.Equal(t, "step 1", mark.Op)
	assert.Equal(t, memory.TierDevice, seg.Tier)
	assert.Equal(t, int64(memory.LargeBuffer), seg.Size)
	assert.Equal(t, memory.RoleActivation, allocA.Role)
	assert.Equal(t, "matmul", allocA.Op)
	assert.Equal(t, int64(3<<20), allocA.Size)
	assert.Equal(t, a.Tier(), allocA.Tier)
	assert.Equal(t, "add", allocG.Op)
	assert.Equal(t, allocA.Seq, freeA.AllocSeq, "a free names its allocation")
	assert.Equal(t, "matmul", freeA.Op)
	assert.Equal(t, allocA.Addr, freeA.Addr)
	assert.Equal(t, memory.NoSeq, freeBefore.AllocSeq, "allocated before the recording")
	assert.Equal(t, memory.RoleParameter, freeBefore.Role)

	// The snapshot names the op of the live gradient and its role.
	found := false
	for _, ts := range snap.Tiers {
		for _, s := range ts.Segments {
			for _, b := range s.Blocks {
				if b.Live {
					found = true
					assert.Equal(t, memory.RoleGradient, b.Role)
					assert.True(t, b.Recorded)
					assert.Equal(t, "add", b.Op)
					assert.Equal(t, allocG.Seq, b.AllocSeq)
				}
			}
		}
	}
	assert.True(t, found)
	assert.GreaterOrEqual(t, snap.HistoryTime, int64(0))
	js, err := json.Marshal(snap)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"role":"gradient"`)
	assert.Contains(t, string(js), `"tier":"device"`)
	require.NoError(t, g.Free())
}

func TestHistoryRingKeepsTheStateOfDroppedEvents(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer m.Close()
	m.RecordHistory(4)
	var live []*memory.Allocation
	for i := range 10 {
		a, err := m.AllocOp(int64(1000*(i+1)), memory.RoleActivation, 0, "op")
		require.NoError(t, err)
		live = append(live, a)
	}
	h := m.History()
	require.Len(t, h.Events, 4)
	assert.Equal(t, uint64(11-4), h.Dropped, "one reservation and 10 allocations, 4 kept")
	// Replaying the kept events from Before gives the current state.
	st := h.Before[memory.TierDevice]
	for _, e := range h.Events {
		switch e.Kind {
		case memory.EventAlloc:
			st.Allocated[e.Role] += e.Block
			st.Requested[e.Role] += e.Size
		case memory.EventReserve:
			st.Reserved += e.Size
		}
	}
	now := m.Stats()
	assert.Equal(t, now.Tiers[memory.TierDevice].Allocated.Current, st.Allocated[memory.RoleActivation])
	assert.Equal(t, now.Tiers[memory.TierDevice].Requested.Current, st.Requested[memory.RoleActivation])
	assert.Equal(t, now.Tiers[memory.TierDevice].Reserved.Current, st.Reserved)
	// Frees of allocations whose events were dropped name no allocation.
	for i, a := range live {
		require.NoError(t, a.Free())
		e := m.History().Events[3]
		require.Equal(t, memory.EventFree, e.Kind)
		if i < 10-3 {
			assert.Equal(t, memory.NoSeq, e.AllocSeq, "free %d", i)
		}
	}
	m.StopHistory()
	require.NotNil(t, m.History(), "kept after StopHistory")
	n := len(m.History().Events)
	a, err := m.Alloc(10, memory.RoleOther)
	require.NoError(t, err)
	require.NoError(t, a.Free())
	assert.Len(t, m.History().Events, n, "nothing recorded once stopped")

	// A new recording never pairs a free with an old recording's event.
	old, err := m.AllocOp(5000, memory.RoleActivation, 0, "old")
	require.NoError(t, err)
	m.RecordHistory(64)
	require.NoError(t, old.Free())
	h = m.History()
	assert.Equal(t, memory.NoSeq, h.Events[len(h.Events)-1].AllocSeq)
}

func TestPoolHistory(t *testing.T) {
	p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{})
	defer p.Close()
	assert.Nil(t, p.History())
	p.RecordHistory(16)
	b, err := p.Alloc(4096, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	h := p.History()
	require.Len(t, h.Events, 3)
	assert.Equal(t, "host", h.Backends[memory.TierHost])
	assert.Equal(t, h.Events[1].Seq, h.Events[2].AllocSeq)

	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	m.Pool(memory.TierDevice).RecordHistory(4)
	assert.Nil(t, m.History(), "a manager's pool records through the manager")
}

// BenchmarkManagerPairHistory is BenchmarkManagerPair with the history
// recorded: the difference is the recorder's cost per pair.
func BenchmarkManagerPairHistory(b *testing.B) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(b, m.Close()) }()
	m.RecordHistory(0)
	b.ReportAllocs()
	for b.Loop() {
		a, err := m.AllocOp(4<<10, memory.RoleActivation, 0, "matmul")
		if err != nil {
			b.Fatal(err)
		}
		sinkAddr += a.Addr()
		if err := a.Free(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pair")
}

// TestHistoryFreeNamesOpWhenItsAllocationLeavesTheRing: a free whose
// allocation's event is the oldest in a full ring overwrites that event;
// the free still names the op that asked for the allocation.
func TestHistoryFreeNamesOpWhenItsAllocationLeavesTheRing(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer m.Close()
	m.RecordHistory(2)
	a, err := m.AllocOp(4096, memory.RoleActivation, 0, "matmul") // reserve, alloc
	require.NoError(t, err)
	m.MarkHistory("step") // the reservation leaves the ring: alloc, mark
	require.NoError(t, a.Free())
	h := m.History()
	require.Len(t, h.Events, 2)
	free := h.Events[1]
	require.Equal(t, memory.EventFree, free.Kind)
	assert.Equal(t, "matmul", free.Op, "the op of the allocation freed")
}

// TestHistoryRecordsCloseReleases: Close gives every reserved byte back,
// and the history says so in both segment modes: replayed from Before,
// its reservations and releases end at the Stats' 0.
func TestHistoryRecordsCloseReleases(t *testing.T) {
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m := memory.NewHostManager(memory.Config{Segments: seg})
		m.RecordHistory(0)
		a, err := m.Alloc(3<<20, memory.RoleActivation)
		require.NoError(t, err)
		_, err = m.Alloc(5000, memory.RoleGradient) // leaked
		require.NoError(t, err)
		require.NoError(t, a.Free())
		require.ErrorIs(t, m.Close(), memory.ErrLeaked)
		h := m.History()
		reserved := [memory.NumTiers]int64{}
		for tier := range memory.NumTiers {
			reserved[tier] = h.Before[tier].Reserved
		}
		for _, e := range h.Events {
			switch e.Kind {
			case memory.EventReserve:
				reserved[e.Tier] += e.Size
			case memory.EventRelease:
				reserved[e.Tier] -= e.Size
			}
		}
		st := m.Stats()
		for tier := range memory.NumTiers {
			assert.Equal(t, st.Tiers[tier].Reserved.Current, reserved[tier], "segments %d, tier %s", seg, tier)
		}
	}
}

// TestHistoryRecordsCloseOfLiveBlocks: Close releases the blocks still
// live, and the history says so: replayed from Before, its allocated and
// requested bytes end at the Stats' 0 (they used to keep the leaked
// blocks, so a Chrome trace of the history ended with bytes allocated in
// no reserved memory), for a manager in both segment modes and for a
// pool of its own.
func TestHistoryRecordsCloseOfLiveBlocks(t *testing.T) {
	replay := func(h *memory.History) (allocated, requested [memory.NumTiers]int64) {
		for tier := range memory.NumTiers {
			for role := range memory.NumRoles {
				allocated[tier] += h.Before[tier].Allocated[role]
				requested[tier] += h.Before[tier].Requested[role]
			}
		}
		for _, e := range h.Events {
			switch e.Kind {
			case memory.EventAlloc:
				allocated[e.Tier] += e.Block
				requested[e.Tier] += e.Size
			case memory.EventFree:
				allocated[e.Tier] -= e.Block
				requested[e.Tier] -= e.Size
			}
		}
		return allocated, requested
	}
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m := memory.NewHostManager(memory.Config{Segments: seg})
		_, err := m.Alloc(700, memory.RoleParameter) // live before the recording, leaked
		require.NoError(t, err)
		m.RecordHistory(0)
		_, err = m.AllocOp(5000, memory.RoleGradient, 0, "matmul") // leaked
		require.NoError(t, err)
		_, err = m.Pool(memory.TierHost).Alloc(3<<20, 0) // leaked, allocated directly
		require.NoError(t, err)
		require.ErrorIs(t, m.Close(), memory.ErrLeaked)
		allocated, requested := replay(m.History())
		assert.Equal(t, [memory.NumTiers]int64{}, allocated, "segments %d", seg)
		assert.Equal(t, [memory.NumTiers]int64{}, requested, "segments %d", seg)
	}
	for _, exp := range []bool{false, true} {
		p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Expandable: exp})
		p.RecordHistory(0)
		_, err := p.Alloc(100, 0)
		require.NoError(t, err)
		require.ErrorIs(t, p.Close(), memory.ErrLeaked)
		allocated, requested := replay(p.History())
		assert.Equal(t, [memory.NumTiers]int64{}, allocated, "expandable %v", exp)
		assert.Equal(t, [memory.NumTiers]int64{}, requested, "expandable %v", exp)
	}
}
