package memory_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestHistoryReplaysToStats: for rings of several capacities (powers of two
// and not, smaller and larger than the first ring), the Before state plus
// the events give each tier's allocated, requested and reserved bytes as
// Stats has them, and the events are the last Capacity ones, in order.
func TestHistoryReplaysToStats(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 255, 256, 257, 300, 513, 5000} {
		for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
			ss := memtest.NewStreamSync()
			m := memory.NewHostManager(memory.Config{Segments: mode, StreamSync: ss})
			rng := rand.New(rand.NewPCG(uint64(capacity), uint64(mode)))
			var live []*memory.Allocation
			for i := range 50 { // before recording
				a, _ := m.Alloc(1+rng.Int64N(3<<20), memory.Role(i%int(memory.NumRoles)))
				live = append(live, a)
			}
			m.RecordHistory(capacity)
			for i := range 800 {
				switch rng.IntN(7) {
				case 0, 1, 2:
					a, err := m.AllocStream(1+rng.Int64N(3<<20), memory.Role(rng.IntN(int(memory.NumRoles))), memory.Stream(rng.IntN(2)))
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, a)
				case 3, 4:
					if len(live) > 0 {
						j := rng.IntN(len(live))
						if rng.IntN(3) == 0 {
							_ = m.RecordStream(live[j], 5)
						}
						if err := live[j].Free(); err != nil {
							t.Fatal(err)
						}
						live = append(live[:j], live[j+1:]...)
					}
				case 5:
					ss.CompleteAll()
					if err := m.EmptyCache(); err != nil {
						t.Fatal(err)
					}
				default:
					if len(live) > 0 {
						_ = m.Migrate(live[rng.IntN(len(live))], memory.Tier(rng.IntN(int(memory.NumTiers))))
					}
					if i%97 == 0 {
						m.MarkHistory("step")
					}
				}
			}
			h := m.History()
			st := m.Stats()
			if h.Capacity != capacity {
				t.Fatalf("capacity %d: History.Capacity %d", capacity, h.Capacity)
			}
			if len(h.Events) > capacity {
				t.Fatalf("capacity %d: %d events", capacity, len(h.Events))
			}
			for i := 1; i < len(h.Events); i++ {
				if h.Events[i].Seq != h.Events[i-1].Seq+1 {
					t.Fatalf("capacity %d: seq %d after %d", capacity, h.Events[i].Seq, h.Events[i-1].Seq)
				}
			}
			state := replayHistory(h)
			var roleAlloc [memory.NumRoles]int64
			for tier := range memory.NumTiers {
				var a, r int64
				for role := range memory.NumRoles {
					a += state[tier].Allocated[role]
					r += state[tier].Requested[role]
					roleAlloc[role] += state[tier].Allocated[role]
				}
				u := st.Tiers[tier]
				if a != u.Allocated.Current || r != u.Requested.Current || state[tier].Reserved != u.Reserved.Current {
					t.Fatalf("capacity %d mode %d tier %s: history gives allocated %d requested %d reserved %d; stats %d %d %d",
						capacity, mode, tier, a, r, state[tier].Reserved, u.Allocated.Current, u.Requested.Current, u.Reserved.Current)
				}
			}
			for role := range memory.NumRoles {
				if roleAlloc[role] != st.Roles[role].Allocated.Current {
					t.Fatalf("capacity %d: role %s: history %d stats %d", capacity, role, roleAlloc[role], st.Roles[role].Allocated.Current)
				}
			}
			for _, a := range live {
				_ = a.Free()
			}
			ss.CompleteAll()
			m.Close()
		}
	}
}

// replayHistory returns each tier's state after h's events, from h.Before.
func replayHistory(h *memory.History) [memory.NumTiers]memory.TierState {
	state := h.Before
	for _, e := range h.Events {
		s := &state[e.Tier]
		switch e.Kind {
		case memory.EventAlloc:
			s.Allocated[e.Role] += e.Block
			s.Requested[e.Role] += e.Size
		case memory.EventFree:
			s.Allocated[e.Role] -= e.Block
			s.Requested[e.Role] -= e.Size
		case memory.EventReserve:
			s.Reserved += e.Size
		case memory.EventRelease:
			s.Reserved -= e.Size
		}
	}
	return state
}
