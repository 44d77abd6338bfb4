package memory

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanPeak: the pages a layout's blocks and obstacles touch at once.
func TestPlanPeak(t *testing.T) {
	const g = 4096
	fixed := []planFixed{{off: 0, size: g / 2, to: planForever}} // half of page 0, for ever
	items := []planItem{
		{size: g, from: 0, to: 2},               // pages 0 and 1, the first shared with the obstacle
		{size: 3 * g, from: 1, to: 3},           // pages 2 to 5
		{size: g / 4, from: 2, to: 4},           // in page 1, once the first item died (frees first)
		{size: 2 * g, from: 3, to: planForever}, // placed nowhere: 2 pages of its own
	}
	offs := []int64{g / 2, 2*g + g/2, g, -1}
	// t=0: pages 0-1; t=1: 0-5 (6); t=2: 0, 1, 2-5 (6); t=3: 0, 1 and 2 of its own (4).
	require.Equal(t, int64(6), planPeak(items, offs, fixed, g))
	require.Equal(t, int64(1), planPeak(nil, nil, fixed, g))
	require.Equal(t, int64(0), planPeak(nil, nil, nil, g))
}

// TestPlanStepsDeclinesAPlanThatGrows: a plan that follows one run to its
// end, before the planner settles, is declined when its layout needs more
// pages at its peak than the segment has mapped (here EmptyCache gave
// back the free pages just before the first plan ended): the next period
// is placed as usual (no plan, no stale sweep), and plans start again at
// the repetition found after it. Without the decision the plan ran on,
// mapping pages to follow it. (A settled planner's plans are judged by
// their footprint instead: TestPlanStepsSettledKeepsAPlanShortOfPages.)
func TestPlanStepsDeclinesAPlanThatGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	step := makePlanStep(rng, 300)
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	sp := p.planner
	r := newStepReplay(t, p, step)
	emptied, declinedAt := false, int64(-1)
	var plansAfter int64
	for range 14 {
		for i := range step.sizes {
			if r.endsPlan(i) && !emptied && !sp.settled {
				// The plan ends with this allocation; what follows is
				// laid out around pages EmptyCache just gave back.
				require.NoError(t, p.EmptyCache())
				emptied = true
				before := sp.declined
				r.alloc(i)
				require.Equal(t, before+1, sp.declined, "the plan after it declined")
				require.Nil(t, sp.plan)
				declinedAt, plansAfter = sp.clock, sp.plans
			} else {
				r.alloc(i)
			}
			r.frees(i)
			if declinedAt >= 0 && sp.clock < declinedAt+int64(len(step.sizes))-1 {
				require.Nil(t, sp.plan, "no plan for a period after the decline")
			}
		}
		r.end()
	}
	t.Logf("plans %d, declined %d, layouts %d, planned %d of %d", sp.plans, sp.declined, sp.layouts, sp.planned, sp.clock)
	require.True(t, emptied, "a plan ran to its end")
	require.Greater(t, sp.plans, plansAfter, "planning again after the period")
	r.close()
	p.mu.Lock()
	checkExpandable(t, p)
	p.mu.Unlock()
	require.NoError(t, p.Close())
}

// TestPlanStepsSettledKeepsAPlanShortOfPages: once the planner has
// settled, a plan that follows one run to its end is not declined for
// needing more pages at its peak than the segment has mapped (EmptyCache
// gave the free ones back just before): its footprint fits the pool's
// peak reserved, so it runs and creates the pages it misses once. The
// usual placement it would have been declined for grew a live gpt2 step
// (TestPlanStepsLiveRecordings) by 33 pages where the plan needed 2.
func TestPlanStepsSettledKeepsAPlanShortOfPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	step := makePlanStep(rng, 300)
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	sp := p.planner
	r := newStepReplay(t, p, step)
	emptied := false
	for range 14 {
		for i := range step.sizes {
			if r.endsPlan(i) && !emptied && sp.settled {
				require.NoError(t, p.EmptyCache())
				emptied = true
				before, mapped := sp.declined, p.Stats().PagesMapped
				r.alloc(i)
				require.Equal(t, before, sp.declined, "no decline")
				require.NotNil(t, sp.plan, "the next plan runs")
				r.frees(i)
				for j := range step.sizes[i+1:] {
					r.alloc(i + 1 + j)
					r.frees(i + 1 + j)
				}
				require.Positive(t, p.Stats().PagesMapped-mapped, "its missing pages created")
				break
			}
			r.alloc(i)
			r.frees(i)
		}
		r.end()
	}
	require.True(t, emptied, "a settled plan ran to its end")
	r.close()
	p.mu.Lock()
	checkExpandable(t, p)
	p.mu.Unlock()
	require.NoError(t, p.Close())
}

// TestPlanStepsTracesWithinGoal replays the 12 traces of bench/traces
// through expandable pools with step plans and holds each to issue 12's
// goal, a peak reserved within 1.02 of the peak requested. Before the
// lifetimes of blocks dying as a period ends were counted (they were
// laid out as living for ever) and plans that would grow the pool were
// declined, trace-char-bf16-ckpt reached 1.0221 and trace-mid-fp16-ckpt
// 1.0201.
func TestPlanStepsTracesWithinGoal(t *testing.T) {
	replayTracesPlanned(t, "", nil)
}

// TestPlanStepsHeldOutTraces replays the 12 held-out traces of
// bench/traces/heldout (recorded in session 38, after the rules were
// chosen, on shapes the others do not have) the same way and holds each
// to the goal. The checkpointed steps of the small and deep models were
// the last two above it (1.0351 and 1.0227 until session 46's page
// boundary for long-lived whole pages, shortLived in pool_expand.go:
// 1.0196 and 1.0194). (Before the first step's gradients and moments
// went on top, stepPlanner.firsts in session 40, char-b48's was 1.0256
// and deep's 1.0390; before the first plans left out the first step's
// one-offs, dropOneOffs in session 41, deep's was 1.0357 and wide's
// 1.0212.)
func TestPlanStepsHeldOutTraces(t *testing.T) {
	replayTracesPlanned(t, "heldout", nil)
}

// replayTracesPlanned replays the traces of bench/traces/dir with step
// plans and holds each to 1.02 peak reserved per peak requested, or to
// its bound in above.
func replayTracesPlanned(t *testing.T, dir string, above map[string]float64) {
	names, err := filepath.Glob(filepath.Join("..", "bench", "traces", dir, "trace-*.csv"))
	require.NoError(t, err)
	if len(names) == 0 {
		t.Skip("no traces in ../bench/traces/" + dir)
	}
	for _, name := range names {
		ops, slots := anaLoad(t, filepath.Join(dir, filepath.Base(name)))
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
		blocks := make([]*Block, slots)
		for i, op := range ops {
			if op.free {
				require.NoError(t, p.Free(blocks[op.slot]))
				blocks[op.slot] = nil
				continue
			}
			b, err := p.Alloc(op.size, 0)
			require.NoError(t, err)
			blocks[op.slot] = b
			if i%397 == 0 {
				p.mu.Lock()
				checkExpandable(t, p)
				p.mu.Unlock()
			}
		}
		st := p.Stats()
		ratio := float64(st.Reserved.Peak) / float64(st.Requested.Peak)
		t.Logf("%s: reserved/requested %.4f (plans %d, declined %d, layouts %d, settled %v)", filepath.Base(name), ratio, p.planner.plans, p.planner.declined, p.planner.layouts, p.planner.settled)
		limit, ok := above[filepath.Base(name)]
		if !ok {
			limit = 1.02
		}
		require.LessOrEqual(t, ratio, limit, filepath.Base(name))
		for _, b := range blocks {
			if b != nil {
				require.NoError(t, p.Free(b))
			}
		}
		require.NoError(t, p.Close())
	}
}

// TestPlanLayoutOrders: a step plan's layout is layoutPlan's while it fits
// in the pages mapped, else the one of layoutWith's orders with the
// fewest pages at its peak; every order gives a valid layout (no two
// items live at once overlap, none overlaps an obstacle still there, all
// below the limit), and some random steps need fewer pages in another
// order than in the first.
func TestPlanLayoutOrders(t *testing.T) {
	const page = 1 << 12
	rng := rand.New(rand.NewPCG(2, 8))
	better := 0
	for range 200 {
		n := 10 + rng.IntN(40)
		items := make([]planItem, n)
		for i := range items {
			from := int64(i)
			to := from + 1 + int64(rng.IntN(n))
			if rng.IntN(10) == 0 {
				to = planForever
			}
			items[i] = planItem{size: int64(1+rng.IntN(3*page/512)) * 512, from: from, to: to}
		}
		fixed := []planFixed{{off: int64(rng.IntN(4)) * page / 2, size: page, to: int64(rng.IntN(n))}}
		const limit = 1 << 30
		peaks := make([]int64, planOrders)
		for by := range planOrders {
			offs := layoutWith(items, fixed, limit, page, by, false)
			for i, a := range items {
				require.True(t, offs[i] >= 0 && offs[i]+a.size <= limit)
				for j := range i {
					b := items[j]
					if a.from < b.to && b.from < a.to {
						require.False(t, offs[i] < offs[j]+b.size && offs[j] < offs[i]+a.size, "items %d and %d overlap in order %d", i, j, by)
					}
				}
				for _, f := range fixed {
					if a.from < f.to {
						require.False(t, offs[i] < f.off+f.size && f.off < offs[i]+a.size, "item %d on the obstacle in order %d", i, by)
					}
				}
			}
			peaks[by] = planPeak(items, offs, fixed, page)
		}
		best := slices.Min(peaks)
		if best < peaks[planByPressure] {
			better++
		}
		var sp stepPlanner
		offs, peak, _ := sp.layout(items, fixed, limit, page, planForever)
		require.Equal(t, layoutPlan(items, fixed, limit, page), offs, "fits: the first order's")
		require.Equal(t, peaks[planByPressure], peak)
		var sp2 stepPlanner
		_, peak, _ = sp2.layout(items, fixed, limit, page, 0)
		require.Equal(t, best, peak, "needs more than mapped: the fewest pages")
	}
	t.Logf("another order needed fewer pages in %d of 200 steps", better)
	require.Positive(t, better)
}
