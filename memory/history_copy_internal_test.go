package memory

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setCopyChunk sets historyCopyChunk and historyChunkHook for a test.
func setCopyChunk(t *testing.T, chunk uint64, hook func()) {
	oldChunk, oldHook := historyCopyChunk, historyChunkHook
	historyCopyChunk, historyChunkHook = chunk, hook
	t.Cleanup(func() { historyCopyChunk, historyChunkHook = oldChunk, oldHook })
}

// requireConsistent checks that h is a window of a recording that began
// at Seq 0: its events in order without a gap, as many dropped before
// them as their first Seq, and, replayed from Before, each tier's and
// role's bytes as st has them.
func requireConsistent(t *testing.T, h *History, st Stats) {
	t.Helper()
	require.LessOrEqual(t, len(h.Events), h.Capacity)
	for i := 1; i < len(h.Events); i++ {
		require.Equal(t, h.Events[i-1].Seq+1, h.Events[i].Seq, "event %d", i)
		require.GreaterOrEqual(t, h.Events[i].Time, h.Events[i-1].Time, "event %d", i)
	}
	if len(h.Events) > 0 {
		require.Equal(t, h.Events[0].Seq, h.Dropped, "the events dropped are those before the first kept")
	}
	state := h.Before
	for i := range h.Events {
		s := ringState{before: state}
		s.apply(&h.Events[i], 1)
		state = s.before
	}
	var roles [NumRoles]int64
	for tier := range NumTiers {
		var a, r int64
		for role := range NumRoles {
			a += state[tier].Allocated[role]
			r += state[tier].Requested[role]
			roles[role] += state[tier].Allocated[role]
		}
		u := st.Tiers[tier]
		require.Equal(t, u.Allocated.Current, a, "tier %s allocated", tier)
		require.Equal(t, u.Requested.Current, r, "tier %s requested", tier)
		require.Equal(t, u.Reserved.Current, state[tier].Reserved, "tier %s reserved", tier)
	}
	for role := range NumRoles {
		require.Equal(t, st.Roles[role].Allocated.Current, roles[role], "role %s", role)
	}
}

// recordChurn makes n events (with n even): allocations that stay live every
// third time, and frees of the others.
func recordChurn(t *testing.T, m *Manager, n int, live *[]*Allocation) {
	for i := 0; i < n; i += 2 {
		a, err := m.AllocOp(int64(1000+100*(i%7)), Role(i%int(NumRoles)), 0, "churn")
		require.NoError(t, err)
		if i%3 == 0 {
			*live = append(*live, a)
			m.MarkHistory("kept")
			continue
		}
		require.NoError(t, a.Free())
	}
}

// TestHistoryCopyUnderRecording: Manager.History copies the ring a chunk
// at a time, letting allocations record between the chunks; whatever they
// overwrite, the copy is the cut at its start, less events lost from its
// front, with the state before the first event kept. Between the chunks
// the hook records: fewer events than the cut (the copy reaches the new
// oldest event), enough to overtake the copy, enough to overwrite the
// whole cut once (a second try), and always (the copy made in one hold of
// the lock).
func TestHistoryCopyUnderRecording(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extra  int  // events the hook records (and some reservations)
		always bool // at every call, else at the first
	}{
		{"front lost", 36, false},
		{"overtaken", 92, false},
		{"lapped once", 120, false},
		{"lapped always", 120, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewHostManager(Config{Segments: SegmentsClassic})
			var live []*Allocation
			recordChurn(t, m, 40, &live) // before the recording
			m.RecordHistory(100)
			for m.hist.n < 150 { // Seq 0..149: the ring holds 50..149
				if m.hist.n == 149 {
					m.MarkHistory("last")
					continue
				}
				a, err := m.AllocOp(300, RoleGradient, 0, "fill")
				require.NoError(t, err)
				require.NoError(t, a.Free())
			}
			require.Equal(t, uint64(150), m.hist.n)
			atCut := m.Stats()
			calls := 0
			var after uint64 // Seq of the next event after the hook's
			setCopyChunk(t, 10, func() {
				if calls++; tc.always || calls == 1 {
					recordChurn(t, m, tc.extra, &live)
					after = m.hist.n
				}
			})
			h := m.History()
			setCopyChunk(t, 10, nil)
			require.NotEmpty(t, h.Events)
			last := h.Events[len(h.Events)-1].Seq
			switch tc.name {
			case "front lost": // the copy reached the new oldest event
				requireConsistent(t, h, atCut)
				assert.Equal(t, uint64(149), last)
				assert.Equal(t, after-100, h.Dropped)
			case "overtaken": // after the first chunk, [140, 150)
				requireConsistent(t, h, atCut)
				assert.Equal(t, uint64(149), last)
				assert.Equal(t, uint64(140), h.Dropped)
			default: // a later cut, the ring full
				requireConsistent(t, h, m.Stats())
				assert.Equal(t, after-1, last)
				assert.Len(t, h.Events, 100)
			}
			for _, a := range live {
				require.NoError(t, a.Free())
			}
			require.NoError(t, m.Close())
		})
	}
}

// TestHistoryConcurrentWithAllocations (run with -race): History, with
// small chunks, taken over and over while goroutines allocate, free and
// mark in a small ring, is always a consistent window: in order, without
// a gap, its Before state giving byte counts that stay within what the
// goroutines hold.
func TestHistoryConcurrentWithAllocations(t *testing.T) {
	setCopyChunk(t, 16, nil)
	m := NewHostManager(Config{Segments: SegmentsClassic})
	defer m.Close()
	m.RecordHistory(1000)
	roles := []Role{RoleActivation, RoleGradient, RoleWorkspace}
	size := func(r Role) int64 { return 512 * int64(r) }
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i, role := range roles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				a, err := m.AllocOp(size(role), role, 0, "w")
				if err != nil {
					t.Error(err)
					return
				}
				if err := a.Free(); err != nil {
					t.Error(err)
					return
				}
				if i == 0 && n%50 == 0 {
					m.MarkHistory("step")
				}
			}
		}()
	}
	for range 300 {
		h := m.History()
		for i := 1; i < len(h.Events); i++ {
			require.Equal(t, h.Events[i-1].Seq+1, h.Events[i].Seq)
		}
		if len(h.Events) > 0 {
			require.Equal(t, h.Events[0].Seq, h.Dropped)
		}
		state := ringState{before: h.Before}
		check := func(at int) {
			for _, role := range roles {
				req := state.before[TierDevice].Requested[role]
				require.Contains(t, []int64{0, size(role)}, req, "role %s after %d of %d events", role, at, len(h.Events))
			}
		}
		check(0)
		for i := range h.Events {
			state.apply(&h.Events[i], 1)
			check(i + 1)
		}
	}
	stop.Store(true)
	wg.Wait()
}

// TestHistoryLetsAllocationsRun: Manager.History of a large ring took the
// manager's lock for the whole copy (a full ring of MaxHistoryCapacity
// events is 1.8 GB), stalling every allocation meanwhile. It copies a
// chunk at a time and lets go of the lock between chunks: an allocation
// made there (by the hook, on the copying goroutine, so it would deadlock
// under a held lock) succeeds, once after each chunk, and the copy
// is the cut taken when it began.
func TestHistoryLetsAllocationsRun(t *testing.T) {
	m := NewHostManager(Config{Segments: SegmentsClassic})
	defer m.Close()
	m.RecordHistory(1 << 12)
	var live []*Allocation
	recordChurn(t, m, 1000, &live)
	var between int
	setCopyChunk(t, 64, func() {
		a, err := m.AllocOp(4<<10, RoleActivation, 0, "between")
		require.NoError(t, err)
		require.NoError(t, a.Free())
		between++
	})
	before := m.hist.n
	st := m.Stats()
	h := m.History()
	require.Len(t, h.Events, int(before))
	assert.Equal(t, int(before+63)/64, between, "one allocation after each chunk")
	assert.Equal(t, before+2*uint64(between), m.hist.n, "the allocations made during the copy were recorded")
	requireConsistent(t, h, st)
	for _, a := range live {
		require.NoError(t, a.Free())
	}
}
