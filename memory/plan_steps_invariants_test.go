package memory_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestPlanStepsInvariants: a pool that plans its steps, driven by a
// repeated step (with deviations) on two streams, keeps every live
// block's bytes, and gives every byte back to the budget after the frees
// and EmptyCache.
func TestPlanStepsInvariants(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 5))
		budget := memory.NewHostBudget(512<<20, "test")
		ss := memtest.NewStreamSync()
		cfg := memory.PoolConfig{Expandable: true, PlanSteps: true, StreamSync: ss}
		if seed%2 == 1 {
			cfg.Limit = 200 << 20
		}
		p := memory.NewPool(memory.NewBudgetBackend(memory.NewHostBackend(memory.TierDevice), budget), cfg)
		type item struct {
			size  int64
			s     memory.Stream
			frees int // index in the step at which it dies (-1: lives for ever)
		}
		step := make([]item, 400)
		for i := range step {
			sz := int64(1) << (8 + rng.IntN(15))
			sz += rng.Int64N(sz)
			die := i + 1 + rng.IntN(60)
			if rng.IntN(20) == 0 {
				die = -1
			}
			step[i] = item{sz, memory.Stream(rng.IntN(2)), die}
		}
		type live struct {
			b    *memory.Block
			seed byte
		}
		var forever []live
		var sd byte
		for st := range 8 {
			dies := map[int][]live{}
			for i, it := range step {
				for _, l := range dies[i] {
					if err := memtest.Check(l.b.Host(), l.seed); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, st, err)
					}
					if err := p.Free(l.b); err != nil {
						t.Fatal(err)
					}
				}
				size := it.size
				if rng.IntN(50) == 0 { // a deviation
					size += 4096
				}
				b, err := p.Alloc(size, it.s)
				if err != nil {
					t.Fatalf("seed %d step %d alloc %d: %v", seed, st, i, err)
				}
				sd++
				memtest.Fill(b.Host(), sd)
				if rng.IntN(30) == 0 {
					_ = p.RecordStream(b, 1-it.s)
				}
				l := live{b, sd}
				switch {
				case it.frees < 0 && st == 0:
					forever = append(forever, l)
				case it.frees < 0 || it.frees >= len(step):
					dies[len(step)] = append(dies[len(step)], l)
				default:
					dies[it.frees] = append(dies[it.frees], l)
				}
			}
			for _, l := range dies[len(step)] {
				if err := memtest.Check(l.b.Host(), l.seed); err != nil {
					t.Fatalf("seed %d step %d: %v", seed, st, err)
				}
				if err := p.Free(l.b); err != nil {
					t.Fatal(err)
				}
			}
			if rng.IntN(3) == 0 {
				ss.CompleteAll()
			}
		}
		for _, l := range forever {
			if err := memtest.Check(l.b.Host(), l.seed); err != nil {
				t.Fatalf("seed %d end: %v", seed, err)
			}
			if err := p.Free(l.b); err != nil {
				t.Fatal(err)
			}
		}
		ss.CompleteAll()
		if err := p.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		u := p.Stats()
		if u.Allocated.Current != 0 || u.Requested.Current != 0 || u.Reserved.Current != 0 || u.Active.Current != 0 || u.InactiveSplit.Current != 0 {
			t.Fatalf("seed %d: not back to zero: %+v", seed, u)
		}
		if used, _ := budget.Used(); used != 0 {
			t.Fatalf("seed %d: budget holds %d", seed, used)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
