package memory

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanStepsBoundTheirWork: three training loops share one pool,
// their allocations interleaved in stretches of random length that
// differ every step (goroutines, as nn's TestCheckpointConcurrent runs
// them). A window of one loop's stretch repeats, so repetitions are
// found, but what follows never does: each plan deviates within a few
// allocations, and the next repetition found plans again. Before the
// planner's work was bounded (planBurst), each made a layout: 298
// layouts of up to 10,800 allocations, 57 s for these 14,400 allocations
// with the pool held, peak reserved 1190 MiB. Now their work is within
// the burst and the credit of the allocations (1.3 s, 43 layouts), and
// the peak reserved within 2% of the usual placement's (1182 MiB against
// 1162: the first plans and their takeTop).
func TestPlanStepsBoundTheirWork(t *testing.T) {
	const loops, steps = 3, 12
	run := func(plan bool) (*stepPlanner, Usage) {
		rng := rand.New(rand.NewPCG(3, 5))
		var st [loops]planStep
		for k := range st {
			st[k] = makePlanStep(rng, 400)
		}
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: plan})
		var r [loops]*stepReplay
		for k := range r {
			r[k] = newStepReplay(t, p, st[k])
		}
		for range steps {
			var next [loops]int
			for {
				var open []int
				for k := range loops {
					if next[k] < len(st[k].sizes) {
						open = append(open, k)
					}
				}
				if len(open) == 0 {
					break
				}
				k := open[rng.IntN(len(open))]
				for n := 20 + rng.IntN(60); n > 0 && next[k] < len(st[k].sizes); n-- {
					r[k].alloc(next[k])
					r[k].frees(next[k])
					next[k]++
				}
			}
			for k := range loops {
				r[k].end()
			}
			require.NoError(t, p.checkExpandable())
		}
		return p.planner, p.Stats()
	}
	sp, planned := run(true)
	_, usual := run(false)
	t.Logf("plans %d, layouts %d (work %d M), allocations placed by a plan %d, deviations %d of %d allocations; peak reserved %d MiB (no plans %d)",
		sp.plans, sp.layouts, sp.spent>>20, sp.planned, sp.deviations, sp.clock, planned.Reserved.Peak>>20, usual.Reserved.Peak>>20)
	require.NotZero(t, sp.plans, "repetitions were found")
	require.LessOrEqual(t, sp.spent, planBurst+planCredit*sp.clock+int64(2*planMaxPeriod*planMaxPeriod), "the planner's work is bounded")
	require.LessOrEqual(t, float64(planned.Reserved.Peak), 1.02*float64(usual.Reserved.Peak))
}

// TestPlanStepsQuietWithoutRepetition: allocations of random sizes never
// repeat. Past its first planHistory allocations the planner stops
// putting small requests after the highest live block (takeTop) and
// looks up one window in planSparse: before, takeTop kept growing the
// segment at its top while free blocks fit below, mapping and unmapping
// pages all along (here 4,738 pages mapped in the last planHistory
// allocations, none without plans; the CUDA manager's mixed pair took
// 4.2 to 5.1 us instead of 0.23 to 0.35 on the H100 host), and every
// window was recorded (32,737; now 4,126).
func TestPlanStepsQuietWithoutRepetition(t *testing.T) {
	const live, n = 256, 4 * planHistory
	run := func(plan bool) (*Pool, int64) {
		rng := rand.New(rand.NewPCG(1, 2))
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: plan})
		blocks := make([]*Block, live)
		var before int64
		replaceRandom(t, p, rng, blocks, n-planHistory)
		before = p.Stats().PagesMapped
		replaceRandom(t, p, rng, blocks, planHistory)
		for _, b := range blocks {
			require.NoError(t, p.Free(b))
		}
		return p, p.Stats().PagesMapped - before
	}
	p, planned := run(true)
	defer func() { require.NoError(t, p.Close()) }()
	q, usual := run(false)
	defer func() { require.NoError(t, q.Close()) }()
	sp := p.planner
	t.Logf("pages mapped in the last %d allocations: %d (no plans %d); windows recorded %d; peak reserved %d MiB (no plans %d)", planHistory, planned, usual, len(sp.seen)+len(sp.older), p.Stats().Reserved.Peak>>20, q.Stats().Reserved.Peak>>20)
	require.False(t, sp.repeats())
	require.False(t, sp.topping())
	require.Zero(t, sp.plans)
	require.LessOrEqual(t, planned, usual+usual/4+8, "pages mapped as without plans")
	require.Less(t, len(sp.seen)+len(sp.older), 2*planHistory/planSparse, "windows recorded sparsely")
}

// TestPlanStepsLiveIndex: the planner's live blocks by address, with the
// tombstones frees leave and allocations reuse, hold exactly the live
// blocks in address order with their allocation clocks, and its blockAt
// finds the block the segment walk finds, through random allocations and
// frees (most at addresses just freed, as training's).
func TestPlanStepsLiveIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	sp := p.planner
	since := map[*Block]int64{}
	var live []*Block
	for n := range 20000 {
		if len(live) > 0 && (len(live) > 300 || rng.IntN(2) == 0) {
			k := rng.IntN(len(live))
			b := live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			delete(since, b)
			require.NoError(t, p.Free(b))
		} else {
			clock := sp.clock
			b, err := p.Alloc(int64(512+rng.IntN(1<<20)), 0)
			require.NoError(t, err)
			live = append(live, b)
			since[b] = clock
		}
		if n%97 != 0 {
			continue
		}
		var got []*Block
		for i, b := range sp.byAddr {
			if i > 0 {
				require.Less(t, sp.addrs[i-1], sp.addrs[i], "addresses in order")
			}
			if b == nil {
				continue
			}
			require.Equal(t, b.addr, sp.addrs[i])
			require.Equal(t, since[b], sp.clocks[i], "the clock of its allocation")
			got = append(got, b)
		}
		require.Len(t, got, len(live))
		require.Equal(t, len(sp.byAddr)-len(got), sp.dead)
		for k := 0; k < 8 && len(live) > 0; k++ {
			b := live[rng.IntN(len(live))]
			a := b.addr + uintptr(rng.Int64N(b.size))
			require.Same(t, blockAt(b.seg, a), sp.blockAt(b.seg, a))
		}
	}
	for _, b := range live {
		require.NoError(t, p.Free(b))
	}
	require.Zero(t, len(sp.byAddr)-sp.dead, "no live entry left")
}

// TestPlanStepsDormantWakes: a run that stops repeating puts the planner
// to sleep (no live blocks by address, no frees recorded: the planned
// mixed pair of BenchmarkPoolPair from 217 to 136 ns on a 2-core host),
// and one that then repeats wakes it: the live blocks are entered again,
// in address order, and its steps are planned.
func TestPlanStepsDormantWakes(t *testing.T) {
	const live = 256
	rng := rand.New(rand.NewPCG(3, 5))
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	sp := p.planner
	blocks := make([]*Block, live)
	replaceRandom(t, p, rng, blocks, 3*planHistory)
	require.True(t, sp.dormant, "asleep after planHistory allocations without a repetition")
	require.Empty(t, sp.byAddr)
	require.Equal(t, planForever, sp.woke)
	// Half of the random blocks stay live through the steps.
	for s := range live / 2 {
		require.NoError(t, p.Free(blocks[s]))
		blocks[s] = nil
	}
	sizes := make([]int64, 600)
	for i := range sizes {
		sizes[i] = int64(512 + rng.IntN(4<<20))
	}
	for range 12 {
		var step []*Block
		for i, n := range sizes {
			b, err := p.Alloc(n, 0)
			require.NoError(t, err)
			step = append(step, b)
			if pl := sp.plan; pl != nil {
				require.GreaterOrEqual(t, pl.start-int64(len(pl.sizes)), sp.woke, "a period recorded in full planned")
			}
			if i%3 == 2 { // a third die at once, the rest at the step's end
				require.NoError(t, p.Free(step[len(step)-2]))
				step[len(step)-2] = nil
			}
		}
		for _, b := range step {
			if b != nil {
				require.NoError(t, p.Free(b))
			}
		}
	}
	require.False(t, sp.dormant, "awake once the steps repeat")
	require.Positive(t, sp.plans)
	require.Positive(t, sp.planned)
	var got []*Block
	for i, b := range sp.byAddr {
		if i > 0 {
			require.Less(t, sp.addrs[i-1], sp.addrs[i], "addresses in order")
		}
		if b != nil {
			got = append(got, b)
		}
	}
	require.Len(t, got, live/2, "the random blocks still live, entered when it woke")
	for _, b := range blocks[live/2:] {
		c, ok := sp.liveSince(b)
		require.True(t, ok)
		require.Equal(t, int64(-1), c, "entered with no clock")
		a := b.addr + uintptr(rng.Int64N(b.size))
		require.Same(t, blockAt(b.seg, a), sp.blockAt(b.seg, a))
	}
	for _, b := range blocks[live/2:] {
		require.NoError(t, p.Free(b))
	}
	require.Zero(t, len(sp.byAddr)-sp.dead, "no live entry left")
}

// replaceRandom makes n allocations of random sizes (512 B to 2 MiB) from
// p, each into a random slot of blocks, freeing the block there first.
func replaceRandom(t *testing.T, p *Pool, rng *rand.Rand, blocks []*Block, n int) {
	for range n {
		s := rng.IntN(len(blocks))
		if blocks[s] != nil {
			require.NoError(t, p.Free(blocks[s]))
		}
		b, err := p.Alloc(int64(512+rng.IntN(2<<20)), 0)
		require.NoError(t, err)
		blocks[s] = b
	}
}
