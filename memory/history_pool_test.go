package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestManagerPoolHistoryIsThePools: Pool.History of a manager's pool
// returned the whole manager's history, every tier's events and Before;
// it is the pool's part: its tier's events and the marks, Before of its
// tier only (replaying to the pool's statistics), Dropped counting its
// tier's events and the marks lost.
func TestManagerPoolHistoryIsThePools(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer m.Close()
	dev, host := m.Pool(memory.TierDevice), m.Pool(memory.TierHost)
	require.NotSame(t, dev, host)
	for _, p := range []*memory.Pool{dev, host} { // segments cached before
		b, err := p.Alloc(4096, 0)
		require.NoError(t, err)
		require.NoError(t, p.Free(b))
	}
	m.RecordHistory(4)
	m.MarkHistory("a")                                            // 0, dropped
	a, err := m.AllocOp(4096, memory.RoleActivation, 0, "matmul") // 1, dropped
	require.NoError(t, err)
	require.Equal(t, memory.TierDevice, a.Tier())
	hb, err := host.Alloc(4096, 0) // 2, dropped
	require.NoError(t, err)
	require.NoError(t, a.Free())                                // 3
	require.NoError(t, host.Free(hb))                           // 4
	m.MarkHistory("b")                                          // 5
	live, err := m.AllocOp(4096, memory.RoleGradient, 0, "add") // 6
	require.NoError(t, err)
	defer live.Free()

	all := m.History()
	require.Len(t, all.Events, 4)
	assert.Equal(t, uint64(3), all.Dropped)

	h := dev.History()
	require.NotNil(t, h)
	var seqs []uint64
	for _, e := range h.Events {
		seqs = append(seqs, e.Seq)
		assert.True(t, e.Kind == memory.EventMark || e.Tier == memory.TierDevice, "event %d of tier %s", e.Seq, e.Tier)
	}
	assert.Equal(t, []uint64{3, 5, 6}, seqs, "the device's free, the mark, the device's allocation")
	assert.Equal(t, uint64(2), h.Dropped, "the device's allocation and mark a; not the host's allocation")
	assert.Equal(t, memory.TierState{}, h.Before[memory.TierHost], "no other tier's state")
	assert.Equal(t, "", h.Backends[memory.TierHost])
	assert.Equal(t, all.Backends[memory.TierDevice], h.Backends[memory.TierDevice])
	st := replayHistory(h)[memory.TierDevice]
	var allocated, requested int64
	for role := range memory.NumRoles {
		allocated += st.Allocated[role]
		requested += st.Requested[role]
	}
	u := dev.Stats()
	assert.Equal(t, u.Allocated.Current, allocated)
	assert.Equal(t, u.Requested.Current, requested)
	assert.Equal(t, u.Reserved.Current, st.Reserved)

	hh := host.History()
	require.NotNil(t, hh)
	seqs = nil
	for _, e := range hh.Events {
		seqs = append(seqs, e.Seq)
	}
	assert.Equal(t, []uint64{4, 5}, seqs, "the host's free and the mark")
	assert.Equal(t, uint64(2), hh.Dropped, "the host's allocation and mark a")
}

// TestManagerPoolHistoryAfterStop: after StopHistory, Manager.History
// returns the recording, but Pool.History of its pools returned nil; they
// return their part of it too, and the part of the next recording once
// one starts.
func TestManagerPoolHistoryAfterStop(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	dev := m.Pool(memory.TierDevice)
	m.RecordHistory(0)
	a, err := m.AllocOp(4096, memory.RoleActivation, 0, "matmul")
	require.NoError(t, err)
	require.NoError(t, a.Free())
	before := dev.History()
	m.StopHistory()
	require.NotNil(t, m.History())
	after := dev.History()
	require.NotNil(t, after, "the stopped recording's part")
	assert.Equal(t, before.Events, after.Events)
	m.RecordHistory(0)
	m.MarkHistory("next")
	h := dev.History()
	require.Len(t, h.Events, 1)
	assert.Equal(t, "next", h.Events[0].Op)
}
