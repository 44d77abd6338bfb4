package memory

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// runPlanSteps replays st through p steps times, calling extra (if not
// nil) after each of its allocations and the frees that follow it, and
// returns the longest period of the plans seen running.
func runPlanSteps(t *testing.T, p *Pool, st planStep, steps int, extra func(step, i int)) (longest int) {
	t.Helper()
	r := newStepReplay(t, p, st)
	for n := range steps {
		for i := range st.sizes {
			r.alloc(i)
			r.frees(i)
			if extra != nil {
				extra(n, i)
			}
			if pl := p.planner.plan; pl != nil {
				longest = max(longest, len(pl.sizes))
			}
		}
		r.end()
	}
	r.close()
	return longest
}

// TestPlanStepsChainedPeriodBounded: a step of 2,000 allocations repeats
// and is planned; then, while one plan runs, each allocation it expects
// comes with planSlack short-lived requests it does not (as many in a
// row as it skips), so it runs to its end over 18,000 allocations. The
// plan of what it saw (makePlan's after) must not pass planMaxPeriod,
// as detect's does not: it laid out 18,000 items with the pool held
// (about twice the burst's work, so that no plan could be made for
// millions of allocations after it) and was declined.
func TestPlanStepsChainedPeriodBounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	st := makePlanStep(rng, 2000)
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	var target *stepPlan // the first plan that starts in the third step
	longest := runPlanSteps(t, p, st, 5, func(n, _ int) {
		sp := p.planner
		if n >= 2 && target == nil && sp.plan != nil && sp.plan.next == 0 && sp.plan.start == sp.clock {
			target = sp.plan
		}
		if target == nil || sp.plan != target || target.next == len(target.sizes) {
			return
		}
		for range planSlack {
			b, err := p.Alloc(5000, 0)
			require.NoError(t, err)
			require.NoError(t, p.Free(b))
		}
	})
	sp := p.planner
	t.Logf("plans %d, layouts %d (work %d M), declined %d, longest period planned %d", sp.plans, sp.layouts, sp.spent>>20, sp.declined, longest)
	require.NotNil(t, target, "the step is planned")
	require.Equal(t, len(target.sizes), target.next, "the plan with the extra requests ran to its end")
	require.LessOrEqual(t, longest, planMaxPeriod)
	for _, c := range sp.cache {
		require.LessOrEqual(t, len(c.items), planMaxPeriod, "no layout of a period above planMaxPeriod")
	}
	require.LessOrEqual(t, sp.spent, int64(planBurst), "the work of the layouts of a 2,000-allocation step")
}

// TestPlanStepsCachedLayoutsWithoutWork: a settled run whose layouts
// come from the cache goes on with its plans when the planner has no
// work in hand (as after the layout of a long period: a step of 12,000
// allocations spends the burst in its first two layouts), since a layout
// reused costs no work. Before, the plan of each step waited for the
// credit (here planBurst of it: four million allocations) though its
// layout was cached.
func TestPlanStepsCachedLayoutsWithoutWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	st := makePlanStep(rng, 1000)
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	sp := p.planner
	const spend = 10 // the step that starts without work in hand
	var layouts, planned []int64
	for n := range spend + 3 {
		if n == spend {
			sp.work = -planBurst // spent by some layout before
		}
		layouts, planned = append(layouts, sp.layouts), append(planned, sp.planned)
		runPlanSteps(t, p, st, 1, nil) // each step frees all its blocks
	}
	t.Logf("layouts by step %v, allocations placed by a plan by step %v", layouts, planned)
	require.True(t, sp.settled)
	require.False(t, sp.off())
	require.Equal(t, layouts[spend-3], sp.layouts, "the layouts of the last steps come from the cache")
	require.Greater(t, sp.planned-planned[spend], int64(2*len(st.sizes)), "and still plan the steps without work in hand")
}
