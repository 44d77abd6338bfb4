package memory_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
)

// checkUsageConsistent checks every statistic a user reads against the
// others and against a snapshot: roles' and tiers' Allocated add up to the
// total's; the snapshot's blocks add up to each tier's Allocated,
// Requested, Reserved (mapped) and InactiveSplit.
func checkUsageConsistent(t *testing.T, m *memory.Manager, where string) {
	t.Helper()
	st := m.Stats()
	snap := m.Snapshot()
	var rolesA, rolesR int64
	for _, r := range st.Roles {
		rolesA += r.Allocated.Current
		rolesR += r.Requested.Current
	}
	var tiersA, tiersR, tiersRes, tiersAct, tiersIS int64
	for _, u := range st.Tiers {
		tiersA += u.Allocated.Current
		tiersR += u.Requested.Current
		tiersRes += u.Reserved.Current
		tiersAct += u.Active.Current
		tiersIS += u.InactiveSplit.Current
	}
	tot := st.Total
	if rolesA != tot.Allocated.Current || tiersA != tot.Allocated.Current {
		t.Fatalf("%s: allocated: roles %d tiers %d total %d", where, rolesA, tiersA, tot.Allocated.Current)
	}
	if rolesR != tot.Requested.Current || tiersR != tot.Requested.Current {
		t.Fatalf("%s: requested: roles %d tiers %d total %d", where, rolesR, tiersR, tot.Requested.Current)
	}
	if tiersRes != tot.Reserved.Current || tiersAct != tot.Active.Current || tiersIS != tot.InactiveSplit.Current {
		t.Fatalf("%s: reserved %d/%d active %d/%d inactive split %d/%d", where, tiersRes, tot.Reserved.Current, tiersAct, tot.Active.Current, tiersIS, tot.InactiveSplit.Current)
	}
	for _, ts := range snap.Tiers {
		var alloc, req, mapped, is int64
		for _, seg := range ts.Segments {
			var segLive, segLiveBytes, segFree int64
			for _, b := range seg.Blocks {
				switch {
				case b.Live:
					alloc += b.Size
					req += b.Requested
					segLive++
					segLiveBytes += b.Size
				case b.Pending:
					segLive++
					segLiveBytes += b.Size
				case !b.Unmapped:
					segFree += b.Size
				}
			}
			mapped += seg.Mapped
			if segLive > 0 {
				is += seg.Mapped - segLiveBytes
			}
		}
		u := ts.Usage
		if u != st.Tiers[ts.Tier] {
			t.Fatalf("%s: tier %s: snapshot usage %+v, stats %+v", where, ts.Tier, u, st.Tiers[ts.Tier])
		}
		if alloc != u.Allocated.Current || req != u.Requested.Current || mapped != u.Reserved.Current || is != u.InactiveSplit.Current {
			t.Fatalf("%s: tier %s: snapshot allocated %d requested %d mapped %d inactive split %d; stats %d %d %d %d",
				where, ts.Tier, alloc, req, mapped, is, u.Allocated.Current, u.Requested.Current, u.Reserved.Current, u.InactiveSplit.Current)
		}
	}
}

func checkAllZero(t *testing.T, m *memory.Manager, where string) {
	t.Helper()
	st := m.Stats()
	zero := func(u memory.Usage) bool {
		return u.Allocated.Current == 0 && u.Requested.Current == 0 && u.Reserved.Current == 0 && u.Active.Current == 0 && u.InactiveSplit.Current == 0
	}
	for tier, u := range st.Tiers {
		if !zero(u) {
			t.Errorf("%s: tier %s not back to zero: %+v", where, memory.Tier(tier), u)
		}
	}
	if u := st.Total; !zero(u) {
		t.Errorf("%s: total not back to zero: %+v", where, u)
	}
	for r, ru := range st.Roles {
		if ru.Allocated.Current != 0 || ru.Requested.Current != 0 {
			t.Errorf("%s: role %s not back to zero: %+v", where, memory.Role(r), ru)
		}
	}
}

// emptyAndClose empties m's cache once everything is freed, checks that
// every statistic and the budget b are back to zero, and closes m.
func emptyAndClose(t *testing.T, m *memory.Manager, b *memory.HostBudget) {
	t.Helper()
	if err := m.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	checkAllZero(t, m, "after freeing everything")
	if used, _ := b.Used(); used != 0 {
		t.Fatalf("budget holds %d", used)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestManagerRandomInvariants runs random manager workloads (allocations
// of all roles, frees, migrations, limits, spills, the scheduler) and
// checks after each step that the statistics agree with each other and
// with a snapshot, and at the end that everything returns to zero.
func TestManagerRandomInvariants(t *testing.T) {
	for seed := range uint64(10) {
		for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
			rng := rand.New(rand.NewPCG(seed, uint64(mode)))
			b := memory.NewHostBudget(96<<20, "test")
			cfg := memory.Config{Segments: mode}
			if seed%2 == 1 {
				cfg.Limits[memory.TierDevice] = 24 << 20
			}
			m := memory.NewBudgetHostManager(cfg, b)
			var live []*memory.Allocation
			var sched *memory.Scheduler
			for step := range 300 {
				switch op := rng.IntN(14); {
				case op < 6:
					var size int64
					switch rng.IntN(3) {
					case 0:
						size = 1 + rng.Int64N(4096)
					case 1:
						size = 1 + rng.Int64N(1<<20)
					default:
						size = 1 + rng.Int64N(12<<20)
					}
					a, err := m.Alloc(size, memory.Role(rng.IntN(int(memory.NumRoles))))
					if err == nil {
						live = append(live, a)
					}
				case op < 9:
					if len(live) > 0 {
						i := rng.IntN(len(live))
						if err := live[i].Free(); err != nil {
							t.Fatal(err)
						}
						live[i] = live[len(live)-1]
						live = live[:len(live)-1]
					}
				case op == 9:
					if len(live) > 0 {
						_ = m.Migrate(live[rng.IntN(len(live))], memory.Tier(rng.IntN(int(memory.NumTiers))))
					}
				case op == 10:
					_ = m.SetLimit(memory.TierDevice, rng.Int64N(5)<<22)
				case op == 11:
					if err := m.EmptyCache(); err != nil {
						t.Fatal(err)
					}
				case op == 12:
					if sched == nil {
						sched, _ = m.NewScheduler(memory.SchedulerConfig{Budget: rng.Int64N(3) << 23, MinBytes: 4096, Patience: 1})
					} else {
						for _, a := range live {
							if rng.IntN(2) == 0 {
								a.Touch()
							}
						}
						_, _ = sched.Step()
					}
				default:
					if len(live) > 0 {
						_ = m.MigrateOn(live[rng.IntN(len(live))], memory.Tier(rng.IntN(int(memory.NumTiers))), 0)
					}
				}
				checkUsageConsistent(t, m, fmt.Sprintf("seed %d mode %d step %d", seed, mode, step))
			}
			for _, a := range live {
				if err := a.Free(); err != nil {
					t.Fatal(err)
				}
			}
			emptyAndClose(t, m, b)
			if t.Failed() {
				t.Fatalf("seed %d mode %d", seed, mode)
			}
		}
	}
}
