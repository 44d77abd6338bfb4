package memory

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanStepsEagerStepsSettle replays the eager training steps recorded
// on the H200 (testdata/README.md; TestExpandableEagerStepsStopChurning
// replays them without plans), then the last step 40 times, through
// expandable pools with and without step plans. With plans, the last 10
// steps must map and unmap no page and synchronise the device none (the
// plans' layouts reused, from the cache), and the peak reserved must be
// no higher than without plans, give or take two pages. Before settled
// plans (compact layouts that keep their pages, pool_expand_plan.go), the
// plans reused one cached layout every step whose footprint was larger
// than the pages mapped, and moved pages to follow it: gpt2 fp16 with
// checkpointing mapped 246 pages a step (4 synchronisations) 30 steps
// on and ended at 1.125 reserved per allocated byte against 1.094
// without plans, as in live training on the H100 (bench/results/gpu-s36.md).
func TestPlanStepsEagerStepsSettle(t *testing.T) {
	const steps, last = 40, 10
	for _, tc := range []struct {
		file   string
		period int
	}{
		{"testdata/eager-gpt2-fp16-ckpt-h200.steps.gz", 2528},
		{"testdata/eager-char-fp16-ckpt-h200.steps.gz", 1268},
		{"testdata/eager-gpt2-fp32-h200.steps.gz", 1354},
	} {
		t.Run(tc.file, func(t *testing.T) {
			calls := readSteps(t, tc.file)
			step := calls[len(calls)-tc.period:]
			var peaks [2]int64
			for k, plan := range []bool{false, true} {
				p := NewPool(newHostBackend(TierHost, "host"), PoolConfig{Expandable: true, PlanSteps: plan})
				live := map[string]*Block{}
				replaySteps(t, p, calls, live)
				repeatStep(t, p, step, steps-last)
				before := p.Stats()
				var layouts int64
				if plan {
					layouts = p.planner.layouts
				}
				repeatStep(t, p, step, last)
				st := p.Stats()
				peaks[k] = st.Reserved.Peak
				t.Logf("plans %v: peak reserved / peak allocated %.4f; last %d steps: %d pages mapped, %d unmapped, %d syncs",
					plan, float64(st.Reserved.Peak)/float64(st.Allocated.Peak), last,
					st.PagesMapped-before.PagesMapped, st.PagesUnmapped-before.PagesUnmapped, st.Syncs-before.Syncs)
				if plan {
					sp := p.planner
					assert.Zero(t, st.PagesMapped-before.PagesMapped, "pages mapped in the last %d steps", last)
					assert.Zero(t, st.PagesUnmapped-before.PagesUnmapped, "pages unmapped in the last %d steps", last)
					assert.Zero(t, st.Syncs-before.Syncs, "synchronisations in the last %d steps", last)
					assert.Equal(t, layouts, sp.layouts, "the last steps reuse cached layouts")
					assert.Positive(t, sp.planned, "the plans place the steps")
					// strata's own runs make 3 allocations in this pool before
					// its first free (the parameters' initialisation frees its
					// temporaries as it goes): no setup, so no size goes on top
					// as a parameter's.
					assert.Nil(t, sp.firsts, "sizes kept as parameters'")
					assert.LessOrEqual(t, peaks[1], peaks[0]+2*p.page, "peak reserved with plans, against %d without", peaks[0])
				}
				p.mu.Lock()
				checkExpandable(t, p)
				p.mu.Unlock()
				freeLive(t, p, live)
				require.NoError(t, p.Close())
			}
		})
	}
}

// TestPlanStepsSettleAndGiveUp repeats a synthetic step: the planner
// settles after planSettleRuns plans in a row run to their end (compact
// layouts from then on) and its steps then map no page; with EmptyCache
// after every step from the 10th, each settled plan maps its pages again,
// and after planGiveUp such periods the planner stops for good: no plan,
// no takeTop, the usual placement.
func TestPlanStepsSettleAndGiveUp(t *testing.T) {
	for _, empty := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(5, 9))
		step := makePlanStep(rng, 300)
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
		sp := p.planner
		r := newStepReplay(t, p, step)
		var mapped []int64
		offAt := -1
		for n := range 30 {
			before := p.Stats().PagesMapped
			r.step()
			if empty && n >= 10 {
				require.True(t, sp.settled, "settled before step %d", n)
				require.NoError(t, p.EmptyCache())
			}
			mapped = append(mapped, p.Stats().PagesMapped-before)
			if sp.off() && offAt < 0 {
				offAt = n
			}
			p.mu.Lock()
			checkExpandable(t, p)
			p.mu.Unlock()
		}
		t.Logf("EmptyCache %v: pages mapped by step %v; plans %d, layouts %d, declined %d, deviations %d, settled %v, moved %d, runs %d, stopped at step %d", empty, mapped, sp.plans, sp.layouts, sp.declined, sp.deviations, sp.settled, sp.moved, sp.runs, offAt)
		require.True(t, sp.settled)
		if empty {
			require.True(t, sp.off(), "a settled planner that maps pages every period stops")
			require.Nil(t, sp.plan)
			plans := sp.plans
			b, err := p.Alloc(step.sizes[0], 0)
			require.NoError(t, err)
			require.NoError(t, p.Free(b))
			require.Equal(t, plans, sp.plans)
		} else {
			require.False(t, sp.off())
			for n, m := range mapped[20:] {
				require.Zero(t, m, "step %d maps pages", 20+n)
			}
		}
		r.close()
		require.NoError(t, p.Close())
	}
}

// TestPlanStepsSettledOutOfPages: while a settled plan runs, growth
// creates the pages it misses rather than taking those the plan places
// blocks on (they would have to move back every period), but when the
// device has no page to give it takes them after all: on a device (the
// strict fake driver) with room for no more pages than the settled pool
// holds, a request the plan does not expect, in the middle of a step,
// still gets its pages.
func TestPlanStepsSettledOutOfPages(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	step := makePlanStep(rng, 300)
	vm := newStrictVM(NewHostBackend(TierDevice).(VirtualMemory))
	p := NewPool(vm, PoolConfig{Expandable: true, PlanSteps: true})
	sp := p.planner
	r := newStepReplay(t, p, step)
	run := func(extra bool) {
		for i := range step.sizes {
			r.alloc(i)
			if i == len(step.sizes)/2 && extra {
				// Half the free bytes: more than lie outside the plan's pages.
				require.NotNil(t, sp.plan)
				u := p.Stats()
				size := (u.Reserved.Current - u.Allocated.Current) / 2
				x, err := p.Alloc(size, 0)
				require.NoError(t, err, "an unexpected request of %d bytes", size)
				require.NoError(t, p.Free(x))
			}
			r.frees(i)
		}
		r.end()
		require.NoError(t, vm.err)
		p.mu.Lock()
		checkExpandable(t, p)
		vm.checkAgrees(t, p, "after a step")
		p.mu.Unlock()
	}
	for range 10 {
		run(false)
	}
	require.True(t, sp.settled)
	held := p.Stats().Reserved.Current / p.page
	vm.capacity = int(held)
	run(true)
	t.Logf("pages held %d, device capacity %d, after the step %d", held, vm.capacity, p.Stats().Reserved.Current/p.page)
	r.close()
	require.NoError(t, p.Close())
}
