package memory_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// FuzzManager drives a host manager (every tier a host backend charged to
// one small HostBudget, as the CPU device's) with random sequences of
// allocations of every role and of sizes from 1 byte to more than the
// budget, frees (and double frees), cache flushes, policy changes,
// injected failures (FailAllocation), history recording and snapshots. It
// checks after every step that the statistics add up (roles and tiers to
// the total; InUse to the live allocations), that every error is one the
// API documents (out of memory, invalid argument, double free), that no
// live allocation was overwritten, and that the budget was never passed;
// at the end, that freeing everything and emptying the cache gives every
// byte back and Close reports no leak. It also migrates live allocations
// between tiers, changes the device tier's limit (under the hybrid policy
// what does not fit spills to the offload tier), and runs a placement
// scheduler over random accesses: every byte of every live allocation
// survives each move.
//
// Input: a configuration byte (classic or expandable segments, tier
// limits, max split size), then pairs (op, arg).
func FuzzManager(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 1, 3, 0, 40, 5, 4, 3, 40})
	f.Add([]byte{1, 0, 200, 8, 255, 0, 7, 6, 3, 9, 1, 1, 2, 2, 9})
	f.Add([]byte{6, 16, 9, 24, 77, 5, 0, 7, 1, 24, 3, 8, 0, 2, 1})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 6 {
		seq := make([]byte, 1+2*100)
		for i := range seq {
			seq[i] = byte(rng.Uint32())
		}
		f.Add(seq)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		runManagerOps(t, data)
	})
}

type liveAlloc struct {
	a    *memory.Allocation
	seed byte
}

func runManagerOps(t *testing.T, data []byte) {
	const budget = 48 << 20
	b := memory.NewHostBudget(budget, "fuzz")
	cfg := memory.Config{Segments: memory.SegmentsClassic}
	if data[0]&1 != 0 {
		cfg.Segments = memory.SegmentsExpandable
	}
	if data[0]&2 != 0 {
		cfg.Limits[memory.TierDevice] = 40 << 20
	}
	if data[0]&4 != 0 {
		cfg.MaxSplitSize = 24 << 20
	}
	m := memory.NewBudgetHostManager(cfg, b)
	var live []liveAlloc
	var freed []*memory.Allocation
	var sched *memory.Scheduler
	checkLive := func(step int, what string) {
		t.Helper()
		for _, l := range live {
			if err := memtest.Check(l.a.Host(), l.seed); err != nil {
				t.Fatalf("step %d: after %s, an allocation of %d bytes in %s was overwritten: %v", step, what, l.a.Size(), l.a.Tier(), err)
			}
		}
	}
	var want int64
	seed := byte(0)
	check := func(step int) {
		t.Helper()
		st := m.Stats()
		var roles, tiers int64
		for _, r := range st.Roles {
			roles += r.Requested.Current
		}
		for _, u := range st.Tiers {
			tiers += u.Requested.Current
		}
		if roles != st.Total.Requested.Current || tiers != st.Total.Requested.Current || m.InUse() != want {
			t.Fatalf("step %d: requested bytes: roles %d, tiers %d, total %d, InUse %d, live %d", step, roles, tiers, st.Total.Requested.Current, m.InUse(), want)
		}
		if used, _ := b.Used(); used > budget || used < 0 {
			t.Fatalf("step %d: the budget holds %d of %d bytes", step, used, budget)
		}
		checkUsageConsistent(t, m, fmt.Sprintf("step %d", step))
	}
	ops := data[1:]
	for step := 0; len(ops) >= 2 && step < 150; step, ops = step+1, ops[2:] {
		op, arg := ops[0], int(ops[1])
		switch op % 12 {
		case 0, 1, 2, 3: // allocate
			size := int64(arg) + 1
			switch op >> 4 & 3 {
			case 1:
				size = int64(arg+1) << 12 // up to 1 MiB
			case 2:
				size = int64(arg+1) << 16 // up to 16 MiB
			case 3:
				size = int64(arg) - 8 // invalid sizes too
			}
			role := memory.Role((arg + int(op>>6)) % int(memory.NumRoles))
			if arg == 255 { // an unknown role
				role = memory.NumRoles
			}
			a, err := m.AllocOp(size, role, 0, "fuzz")
			if err != nil {
				var oom *memory.OOMError
				switch {
				case errors.As(err, &oom):
				case errors.Is(err, memory.ErrInvalidArgument) && (size <= 0 || role >= memory.NumRoles):
				default:
					t.Fatalf("step %d: alloc of %d bytes for %v: unexpected error %v", step, size, role, err)
				}
				break
			}
			if a.Size() != size || (a.Host() != nil && int64(len(a.Host())) != size) {
				t.Fatalf("step %d: allocation of %d bytes has size %d and a host view of %d", step, size, a.Size(), len(a.Host()))
			}
			seed++
			memtest.Fill(a.Host(), seed)
			live = append(live, liveAlloc{a, seed})
			want += size
		case 4, 5: // free
			if len(live) == 0 {
				break
			}
			i := arg % len(live)
			l := live[i]
			if err := memtest.Check(l.a.Host(), l.seed); err != nil {
				t.Fatalf("step %d: allocation of %d bytes was overwritten: %v", step, l.a.Size(), err)
			}
			if err := l.a.Free(); err != nil {
				t.Fatalf("step %d: free: %v", step, err)
			}
			want -= l.a.Size()
			freed = append(freed, l.a)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		case 6: // a double free is refused and changes nothing
			if len(freed) > 0 {
				if err := freed[arg%len(freed)].Free(); !errors.Is(err, memory.ErrDoubleFree) {
					t.Fatalf("step %d: double free: %v", step, err)
				}
			}
		case 7:
			if err := m.EmptyCache(); err != nil {
				t.Fatalf("step %d: EmptyCache: %v", step, err)
			}
		case 8:
			switch arg % 5 {
			case 0:
				m.SetPolicy(memory.HybridPolicy())
			case 4:
				m.FailAllocation(int64(arg%7) + 1)
			default:
				m.SetPolicy(memory.SingleTierPolicy(memory.Tier(arg % 4)))
			}
		case 9:
			switch arg % 4 {
			case 0:
				m.RecordHistory(64)
			case 1:
				m.MarkHistory("mark")
			case 2:
				m.StopHistory()
				_ = m.History()
			default:
				s := m.Snapshot()
				var n int
				for _, ts := range s.Tiers {
					for _, seg := range ts.Segments {
						for _, bl := range seg.Blocks {
							if bl.Live {
								n++
							}
						}
					}
				}
				if n != len(live) {
					t.Fatalf("step %d: the snapshot has %d live blocks, %d are live", step, n, len(live))
				}
				m.ResetPeaks()
			}
		case 10: // migrate a live allocation to any tier (or an unknown one)
			if len(live) == 0 {
				break
			}
			l := live[arg%len(live)]
			to := memory.Tier(int(op>>4) % (int(memory.NumTiers) + 1))
			err := m.Migrate(l.a, to)
			var oom *memory.OOMError
			switch {
			case err == nil:
			case errors.As(err, &oom), errors.Is(err, memory.ErrInjected):
			case errors.Is(err, memory.ErrInvalidArgument) && to >= memory.NumTiers:
			default:
				t.Fatalf("step %d: migrating %d bytes from %s to %s: unexpected error %v", step, l.a.Size(), l.a.Tier(), to, err)
			}
			checkLive(step, "a migration")
		case 11: // budgets and the placement scheduler
			switch arg % 4 {
			case 0:
				if err := m.SetLimit(memory.TierDevice, int64(arg%5)<<22); err != nil {
					t.Fatalf("step %d: SetLimit: %v", step, err)
				}
			case 1:
				if sched == nil {
					var err error
					if sched, err = m.NewScheduler(memory.SchedulerConfig{Budget: int64(arg%3) << 23, MinBytes: 4096, Patience: 1 + arg%3, ColdTouches: float64(arg % 2)}); err != nil {
						t.Fatalf("step %d: NewScheduler: %v", step, err)
					}
				}
			case 2:
				for i, l := range live {
					for range (i + arg) % 4 {
						l.a.Touch()
					}
				}
			default:
				if sched != nil {
					p, err := sched.Step()
					var oom *memory.OOMError
					if err != nil && !errors.As(err, &oom) && !errors.Is(err, memory.ErrInjected) {
						t.Fatalf("step %d: scheduler step: unexpected error %v", step, err)
					}
					if p.Excess < 0 || p.Demoted < 0 || p.Promoted < 0 {
						t.Fatalf("step %d: plan %+v", step, p)
					}
					checkLive(step, "a scheduler step")
				}
			}
		}
		check(step)
	}
	m.FailAllocation(0)
	for _, l := range live {
		if err := memtest.Check(l.a.Host(), l.seed); err != nil {
			t.Fatalf("at the end: allocation of %d bytes was overwritten: %v", l.a.Size(), err)
		}
		if err := l.a.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if m.InUse() != 0 {
		t.Fatalf("%d bytes in use after freeing everything", m.InUse())
	}
	if used, _ := b.Used(); used != 0 {
		t.Fatalf("the budget still holds %d bytes after EmptyCache", used)
	}
	checkAllZero(t, m, "after freeing everything and EmptyCache")
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
