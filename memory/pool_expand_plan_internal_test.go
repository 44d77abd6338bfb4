package memory

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// planStep is a synthetic training step: allocations (sizes) and, after
// each, the frees of earlier allocations of the step (by index) or of
// the step before (index - len), so that blocks live across steps.
type planStep struct {
	sizes []int64
	frees [][]int // frees[i]: freed after allocation i
}

// makePlanStep draws a step of n allocations: activations kept until the
// backward half frees them in reverse, temporaries freed soon, and a few
// blocks that live into the next step.
func makePlanStep(rng *rand.Rand, n int) planStep {
	st := planStep{sizes: make([]int64, n), frees: make([][]int, n)}
	freed := make([]bool, n)
	for i := range n {
		switch rng.IntN(4) {
		case 0:
			st.sizes[i] = int64(1 + rng.IntN(4096)) // tiny
		default:
			st.sizes[i] = int64(1+rng.IntN(24)) << 18 // 256 KiB to 6 MiB
		}
	}
	for i := range n {
		if i+1 < n && rng.IntN(3) == 0 { // a temporary
			j := min(n-1, i+1+rng.IntN(4))
			st.frees[j] = append(st.frees[j], i)
			freed[i] = true
		}
	}
	for i := 0; i < n/2; i++ { // activations die in reverse in the second half
		if !freed[i] && rng.IntN(8) != 0 {
			st.frees[n-1-i] = append(st.frees[n-1-i], i)
			freed[i] = true
		}
	}
	for i := range n { // the rest die early in the next step
		if !freed[i] {
			j := rng.IntN(n / 4)
			st.frees[j] = append(st.frees[j], i-n)
		}
	}
	return st
}

// stepReplay allocates and frees a planStep's blocks through a pool, one
// step after another: it holds the blocks of the step replayed and of the
// one before, which the step's frees may name.
type stepReplay struct {
	t         *testing.T
	p         *Pool
	st        planStep
	prev, cur map[int]*Block
}

func newStepReplay(t *testing.T, p *Pool, st planStep) *stepReplay {
	return &stepReplay{t: t, p: p, st: st, prev: map[int]*Block{}, cur: map[int]*Block{}}
}

// alloc allocates the step's block i (on stream 0) and returns it.
func (r *stepReplay) alloc(i int) *Block {
	b, err := r.p.Alloc(r.st.sizes[i], 0)
	require.NoError(r.t, err)
	r.cur[i] = b
	return b
}

// endsPlan reports whether the step's allocation i is the last one the
// pool's current plan lays out.
func (r *stepReplay) endsPlan(i int) bool {
	pl := r.p.planner.plan
	return pl != nil && pl.next == len(pl.sizes)-1 && pl.sizes[pl.next] == RoundSize(r.st.sizes[i])
}

// frees makes the frees that follow the step's allocation i.
func (r *stepReplay) frees(i int) {
	for _, f := range r.st.frees[i] {
		m, k := r.cur, f
		if f < 0 {
			m, k = r.prev, f+len(r.st.sizes)
		}
		if b, ok := m[k]; ok {
			require.NoError(r.t, r.p.Free(b))
			delete(m, k)
		}
	}
}

// end ends a step: what it did not free of the step before is freed.
func (r *stepReplay) end() {
	for _, b := range r.prev {
		require.NoError(r.t, r.p.Free(b))
	}
	r.prev, r.cur = r.cur, map[int]*Block{}
}

// step replays a whole step.
func (r *stepReplay) step() {
	for i := range r.st.sizes {
		r.alloc(i)
		r.frees(i)
	}
	r.end()
}

// close frees the blocks the last step left live.
func (r *stepReplay) close() {
	for _, b := range r.prev {
		require.NoError(r.t, r.p.Free(b))
	}
	r.prev = map[int]*Block{}
}

// TestExpandablePlanSteps replays a synthetic step many times through
// expandable pools with PlanSteps (over host memory, and over the strict
// fake driver with one allocation in five on a second stream), with
// deviations: a step with an allocation missing, a
// step with extra ones, a step of other sizes. It checks the invariants
// and the device's mappings after every call, writes each live block's
// bytes and checks them at its free (planned blocks never overlap live
// ones), and that plans were made, placed most allocations, ended at the
// deviations and started again after them.
func TestExpandablePlanSteps(t *testing.T) {
	for _, strict := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(7, 11))
		step := makePlanStep(rng, 200)
		other := makePlanStep(rng, 200)
		var vm *strictVM
		var backend Backend = NewHostBackend(TierDevice)
		if strict {
			vm = newStrictVM(backend.(VirtualMemory))
			backend = vm
		}
		p := NewPool(backend, PoolConfig{Expandable: true, PlanSteps: true})
		type liveBlock struct {
			b    *Block
			fill byte
		}
		prev, cur := map[int]liveBlock{}, map[int]liveBlock{}
		calls := 0
		check := func(at string) {
			calls++
			if calls%13 != 0 {
				return
			}
			p.mu.Lock()
			checkExpandable(t, p)
			if vm != nil {
				vm.checkAgrees(t, p, at)
			}
			p.mu.Unlock()
		}
		free := func(lb liveBlock, at string) {
			h := lb.b.Host()
			for k := 0; k < len(h); k += 509 {
				if h[k] != lb.fill {
					require.Failf(t, "a live block's bytes changed", "%s: byte %d of a block of %d", at, k, len(h))
				}
			}
			require.NoError(t, p.Free(lb.b), at)
			check(at)
		}
		var devAt []int64
		for n := range 16 {
			s := step
			switch n {
			case 6:
				s = other
			case 9: // an allocation missing
				s = planStep{sizes: append(append([]int64(nil), step.sizes[:100]...), step.sizes[101:]...)}
				s.frees = append(append([][]int(nil), step.frees[:100]...), step.frees[101:]...)
				for i := range s.frees {
					var fs []int
					for _, f := range s.frees[i] {
						switch {
						case f == 100:
						case f > 100:
							fs = append(fs, f-1)
						default:
							fs = append(fs, f)
						}
					}
					s.frees[i] = fs
				}
			}
			before := p.planner.deviations
			for i, size := range s.sizes {
				if n == 12 && i == 150 { // extra allocations
					for k := range 3 {
						b, err := p.Alloc(int64(k+1)<<20, 0)
						require.NoError(t, err)
						check("extra")
						require.NoError(t, p.Free(b))
					}
				}
				at := "step " + string(rune('A'+n)) + " alloc"
				var st Stream
				if strict && i%5 == 0 {
					st = 7
				}
				b, err := p.Alloc(size, st)
				require.NoError(t, err, at)
				fill := byte(rng.Uint32())
				h := b.Host()
				for k := 0; k < len(h); k += 509 {
					h[k] = fill
				}
				cur[i] = liveBlock{b, fill}
				check(at)
				for _, f := range s.frees[i] {
					m, k := cur, f
					if f < 0 {
						m, k = prev, f+len(s.sizes)
					}
					if lb, ok := m[k]; ok {
						free(lb, "free")
						delete(m, k)
					}
				}
			}
			for _, lb := range prev { // what the step did not free of the one before
				free(lb, "leftover")
			}
			prev, cur = cur, map[int]liveBlock{}
			devAt = append(devAt, p.planner.deviations-before)
		}
		sp := p.planner
		t.Logf("strict %v: plans %d, layouts %d, planned %d of %d, deviations by step %v", strict, sp.plans, sp.layouts, sp.planned, sp.clock, devAt)
		require.Positive(t, sp.plans)
		require.Greater(t, sp.planned, sp.clock/2, "most allocations placed by a plan")
		require.Positive(t, devAt[6], "the step of other sizes ends the plan")
		require.NotNil(t, sp.plan, "planning again after the deviations")
		for _, lb := range prev {
			free(lb, "end")
		}
		require.NoError(t, p.Close())
	}
}

// TestPlanDropOneOffs: a layout leaves out runs of planOneOffRun or more
// items in a row that live for ever and have no counterpart in the
// history (from below unseen), and keeps shorter runs, items that die,
// and items with a counterpart, in order.
func TestPlanDropOneOffs(t *testing.T) {
	item := func(from, to int64) planItem { return planItem{size: 512, from: from, to: to} }
	var items []planItem
	var want []int64 // the froms kept
	for k := range int64(40) {
		to := k + 3 // dies
		switch {
		case k >= 5 && k < 5+planOneOffRun: // a run long enough: dropped
			to = planForever
		case k >= 20 && k < 20+planOneOffRun-1: // one short: kept
			to = planForever
		case k >= 30: // lives for ever, but has a counterpart (unseen 30): kept
			to = planForever
		}
		items = append(items, item(k, to))
		if k < 5 || k >= 5+planOneOffRun {
			want = append(want, k)
		}
	}
	run := slices.Clone(items[5 : 5+planOneOffRun])
	head := slices.Clone(items[:5])
	var got []int64
	for _, it := range dropOneOffs(items, 30) { // in place
		got = append(got, it.from)
	}
	require.Equal(t, want, got)
	require.Len(t, dropOneOffs(head, 30), 5, "nothing to drop")
	require.Empty(t, dropOneOffs(run, 30), "a run alone")
	require.Len(t, dropOneOffs(run[1:], 30), planOneOffRun-1, "one short")
}
