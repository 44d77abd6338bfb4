package memory_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

type streamLive struct {
	a    *memory.Allocation
	seed byte
}

// TestManagerRandomStreams is TestManagerRandomInvariants with two more
// streams: allocations on them, RecordStream, MigrateOn to another
// stream, Holds, and the data of every live allocation checked.
func TestManagerRandomStreams(t *testing.T) {
	for seed := range uint64(12) {
		for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
			t.Run(fmt.Sprintf("%d/%d", seed, mode), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(mode)+7))
				b := memory.NewHostBudget(128<<20, "test")
				ss := memtest.NewStreamSync()
				cfg := memory.Config{Segments: mode, StreamSync: ss}
				if seed%2 == 1 {
					cfg.Limits[memory.TierDevice] = 24 << 20
				}
				if seed%3 == 2 {
					cfg.MaxSplitSize = 21 << 20
				}
				m := memory.NewBudgetHostManager(cfg, b)
				var live []streamLive
				var holds []func()
				var sched *memory.Scheduler
				var sd byte
				check := func(step int, what string) {
					t.Helper()
					for _, l := range live {
						if err := memtest.Check(l.a.Host(), l.seed); err != nil {
							t.Fatalf("step %d after %s: %d bytes in %s overwritten: %v", step, what, l.a.Size(), l.a.Tier(), err)
						}
					}
					checkUsageConsistent(t, m, fmt.Sprintf("step %d after %s", step, what))
				}
				for step := range 300 {
					what := ""
					switch op := rng.IntN(18); {
					case op < 6:
						var size int64
						switch rng.IntN(4) {
						case 0:
							size = 1 + rng.Int64N(4096)
						case 1:
							size = 1 + rng.Int64N(1<<20)
						case 2:
							size = 1 + rng.Int64N(12<<20)
						default:
							size = 20<<20 + rng.Int64N(12<<20)
						}
						s := memory.Stream(rng.IntN(3))
						what = fmt.Sprintf("alloc %d on %d", size, s)
						a, err := m.AllocStream(size, memory.Role(rng.IntN(int(memory.NumRoles))), s)
						if err == nil {
							sd++
							memtest.Fill(a.Host(), sd)
							live = append(live, streamLive{a, sd})
						}
					case op < 9:
						what = "free"
						if len(live) > 0 {
							i := rng.IntN(len(live))
							if err := live[i].a.Free(); err != nil {
								t.Fatal(err)
							}
							live[i] = live[len(live)-1]
							live = live[:len(live)-1]
						}
					case op == 9:
						what = "migrate"
						if len(live) > 0 {
							_ = m.Migrate(live[rng.IntN(len(live))].a, memory.Tier(rng.IntN(int(memory.NumTiers))))
						}
					case op == 10:
						what = "setlimit"
						_ = m.SetLimit(memory.TierDevice, rng.Int64N(5)<<22)
					case op == 11:
						what = "emptycache"
						if err := m.EmptyCache(); err != nil {
							t.Fatal(err)
						}
					case op == 12:
						what = "sched"
						if sched == nil {
							sched, _ = m.NewScheduler(memory.SchedulerConfig{Budget: rng.Int64N(3) << 23, MinBytes: 4096, Patience: 1})
						} else {
							for _, l := range live {
								if rng.IntN(2) == 0 {
									l.a.Touch()
								}
							}
							_, _ = sched.Step()
						}
					case op == 13:
						what = "migrateon"
						if len(live) > 0 {
							_ = m.MigrateOn(live[rng.IntN(len(live))].a, memory.Tier(rng.IntN(int(memory.NumTiers))), memory.Stream(rng.IntN(3)))
						}
					case op == 14:
						what = "recordstream"
						if len(live) > 0 {
							if err := m.RecordStream(live[rng.IntN(len(live))].a, memory.Stream(rng.IntN(3))); err != nil {
								t.Fatal(err)
							}
						}
					case op == 15:
						what = "complete"
						if rng.IntN(2) == 0 {
							ss.CompleteAll()
						} else {
							ss.Complete(memory.Stream(rng.IntN(3)))
						}
					case op == 16:
						what = "hold"
						if rng.IntN(2) == 0 || len(holds) == 0 {
							if rel, err := m.Hold(memory.TierDevice, 1+rng.Int64N(8<<20)); err == nil {
								holds = append(holds, rel)
							}
						} else {
							holds[len(holds)-1]()
							holds = holds[:len(holds)-1]
						}
					default:
						what = "emptystream"
						if err := m.EmptyStreamCache(memory.Stream(rng.IntN(3))); err != nil {
							t.Fatal(err)
						}
					}
					check(step, what)
				}
				for _, l := range live {
					if err := l.a.Free(); err != nil {
						t.Fatal(err)
					}
				}
				for _, h := range holds {
					h()
				}
				emptyAndClose(t, m, b)
				if err := ss.Err(); err != nil {
					t.Fatal(err)
				}
				if n := ss.Outstanding(); n != 0 {
					t.Fatalf("%d events outstanding", n)
				}
			})
		}
	}
}
