package memory

import (
	"cmp"
	"slices"
)

// Step plans for expandable segments (pool_expand.go).
//
// A training run repeats the same allocations every step: the same
// sizes, in the same order, each freed at the same point. Placement that
// knows when each block dies packs the blocks live at the peak far
// tighter than best fit, which only sees the free blocks of the moment
// (offline dynamic storage allocation: plan_layout.go). So an expandable
// pool with PoolConfig.PlanSteps records its allocations (rounded size and stream) and when each
// was freed, on the allocation clock (the number of allocations made
// before), and plans:
//
//   - Detection: when the last planWindow allocations repeat an earlier
//     stretch (same sizes, same streams: a hash of the window, then a
//     comparison) that ended at least planMinPeriod allocations back (the
//     latest such: a step, not a layer's allocations repeated within a
//     step), what followed that stretch, up to now, is taken as what comes
//     next: a period.
//   - Layout: the period's blocks on the stream of the last allocation,
//     with their lifetimes (a block still live now dies as its
//     counterpart a period before did, if that one died; one whose
//     counterpart died just before the period's last allocation dies as
//     the next period begins), are laid out in its segment (layoutPlan)
//     around the blocks live now, which stay where they are (those
//     allocated within the last period taken to die as their
//     counterparts did, the others to live for ever). planPeak counts the
//     pages the layout's blocks and the obstacles touch at its peak; when
//     that is more than the segment has mapped, the layout is made again
//     in layoutWith's other greedy order (longest lives first among
//     equal bytes live) and the one with fewer pages at its peak kept.
//     Steps alternate between a few layouts, so the last planCached are
//     kept (with their peaks) and one is reused when the same blocks are
//     laid out around the same obstacles.
//   - Decision: until the planner settles (below), a plan that follows
//     one run to its end is adopted only if its layout's peak fits in the
//     pages the segment has mapped: the steps before ran in those pages,
//     and a plan that needs more would grow the pool for a placement that
//     did without. Otherwise no plan is made for a period
//     (stepPlanner.quiet): its allocations are placed as usual (best fit,
//     no takeTop, no stale sweep), and the repetition found after it
//     plans again. A settled planner's plans are judged by their
//     footprint instead: on strata's live gpt2 step a settled plan 2
//     pages short of the pages mapped was declined and the usual placement
//     grew the pool by 33 (TestPlanStepsLiveRecordings,
//     TestPlanStepsSettledKeepsAPlanShortOfPages).
//   - Between plans (the first step, a deviation), requests up to
//     SmallSize go right after the highest live block (takeTop), so that
//     small blocks allocated together, such as the optimizer state the
//     first step creates, share pages instead of each pinning one among
//     short-lived blocks: the plans must lay out around them.
//   - Execution (pool_expand_plan_take.go): each following allocation that
//     is the one expected goes where the plan puts it, once its range is
//     seen to be free (free blocks, holes, which are mapped, or stale
//     address space, which is swept first). A request the plan did not
//     expect is placed as usual; if the one expected comes within
//     planSlack, the plan skips to it; after planSlack unexpected ones in a
//     row, or when the range planned is taken, the plan ends, and the next
//     repetition found starts another. A plan that runs to its end is
//     followed at once by the plan of the allocations it saw, if the
//     decision takes it (the window where it ended is recorded, so that
//     the detection after a declined plan finds that period, not one from
//     before the plans, which gave plans of 11 periods at once).
//   - Settling: a layout made for the fewest pages at each moment (above)
//     holds its peak only while pages move as the step goes: the pages it
//     touches over the whole period (its footprint, planFoot) are more.
//     Running the same cached layout every step thus lent pages away
//     from places it needed later in the period or in the next one, swept
//     them (a device synchronisation) and mapped them back, for ever: on
//     the eager steps recorded on the H200 (gpt2 fp16 with checkpointing;
//     footprints of 1,784 to 2,171 pages for peaks of 1,612 to 1,715,
//     with 1,635 mapped) 867 pages and 36 synchronisations a step, then,
//     once the churn slack let growth create pages (pool_expand_churn.go),
//     2.7 pages and 1.7 synchronisations a step at 1.125 peak reserved
//     per allocated byte, against 1.094 without plans (live on the H100:
//     1.125 against 1.095, 58 pages and 3 synchronisations a step,
//     bench/results/gpu-s36.md). So after planSettleRuns plans in a row
//     that ran to their end the planner has settled, for good: its
//     layouts are compact (layoutWith's compact mode: each item where it touches the
//     fewest pages nothing touched before, then the least page-time; the
//     other order is tried when the footprint passes the pages mapped, the
//     smaller footprint kept), 1,622 to 1,627 pages for that step; while a
//     settled plan runs, growth takes no page that the plan places a block
//     on (steal's stealUnplanned pass) and creates the pages it misses
//     instead (taking them after all when the device has none), so the
//     footprint's pages, once mapped, stay where the layout needs them; a
//     settled plan is declined when its footprint, with the pool's other
//     pages, would pass the pool's peak reserved bytes by more than
//     1/planSettleGrow; and a settled planner whose plans map pages (or are
//     declined) planGiveUp periods in a row stops for good (stepPlanner.stop):
//     the usual placement and the churn slack serve it from then on.
//     Replaying the recorded steps and then the last one 120 times
//     (TestPlanStepsEagerStepsSettle does 40), no page is mapped or
//     unmapped and no device synchronised from the first repeated step
//     on, the layouts coming from the cache, at 1.0079 peak reserved per
//     allocated byte for gpt2 fp16 with checkpointing (no plans: 1.0935
//     once settled, 2.7 pages a step with the plans before), 1.0092 for
//     the char model (1.0920; 35 pages and 5 synchronisations a step
//     before, at 1.0607) and 1.0031 for gpt2 fp32 (1.0160; 1.0204
//     before; 1.0028 before dropOneOffs, one page). These are the
//     figures before session 46: the recordings carry no roles, so the
//     page boundary for long-lived whole pages (shortLived in
//     pool_expand.go) takes their first step's whole-page activations
//     too, and they replay at 1.0110, 1.0204 and 1.0015 (the live
//     recordings carry the roles: TestPlanStepsLiveRecordings). With two
//     requests more in every tenth step (deviations), the last 20 of 100
//     steps still map nothing. No 4-step trace of
//     bench/traces settles, so their replays are what they were (the
//     same peaks, pages mapped and synchronisations).
//
// A plan only chooses an address among free ones, so a wrong prediction
// costs memory, never correctness. On PyTorch's traces scaled by 0.2 to 4
// (40 scales; bench/results/cpu-expandable-scaled-2026-12-03-s18.md) it
// took the fp16 trace with checkpointing from a mean peak
// reserved/requested of 1.056 to 1.010 (max 1.147 to 1.031, 30 scales
// above 1.02 to 3), and fp32 from 1.0047 to 1.0038 (max 1.018 to 1.016);
// on 60 other scales fp16 1.053 to 1.010 (47 above 1.02 to 3), fp32
// 1.0050 to 1.0035 (1 to 0). Over all 12 traces of bench/traces at those
// 40 scales (480 replays; 2026-12-06, TestExpandableScaleSweep
// -expandable-sweep 40 -expandable-sweep-traces all, with and without
// -expandable-sweep-plan) the plans as they were took the mean
// from 1.0238 (no plans) to 1.0136, the max from 1.147 to 1.143 and the
// replays above 1.02 from 163 to 99; counting the lives that end as a
// period ends (they were laid out as living for ever, and so were their
// blocks as obstacles: 18 pages of the 338 a bf16 step's layout held),
// the second order and the decision took them to 1.0122, 1.086 and 83
// (better than before in 207 replays, worse in 70). On the 60 other
// scales (720 replays): no plans 1.0231, 1.156, 246; before 1.0133,
// 1.106, 129; now 1.0119, 1.081, 115 (better in 308, worse in 106). At
// scale 1 every trace is within 1.02 (the worst trace-mid-fp16-ckpt,
// 1.0184, which the plans left at 1.0201; trace-char-bf16-ckpt 1.0221 to
// 1.0158), and no plans
// leave trace-char-b32-fp16-ckpt-plain at 1.0399 (1.0129 with them).
// Twelve traces recorded after these rules were chosen
// (bench/traces/heldout, session 38; TestPlanStepsHeldOutTraces) replayed
// at 1.0029 to 1.0390: eight within 1.02, and four checkpointed ones
// above. Their first step also creates the optimizer's moments, so it
// differs from the next ones: the second step's plans, detected from
// it, deviate one after the other (and the peak reserved is reached
// under one of them), and the first step's long-lived blocks, placed by
// best fit, leave free bytes in the pages they touch that the layouts
// of later steps fill only in part (bench/results/gpu-s38.md;
// TestPlanStepsTraceDiag -plan-diag shows a replay's plans and peaks;
// TestPlanStepsLayoutHeadroom, the steady step's layout with those
// blocks packed: within 1.012 for all four).
//
// Parameters' kin on top (session 40, stepPlanner.firsts): a pool whose
// first planSetup or more allocations come before its first free (a
// model's parameters, created one after another) keeps their sizes above
// SmallSize, less each size freed since; while no plan runs, a request
// of such a size (the first step's gradients and moments, which live as
// long) goes right after the highest live block, as small requests do,
// so they lie side by side instead of in holes between the first step's
// short-lived blocks. A size once freed (an activation the size of a
// parameter) leaves the set; with fewer allocations before the first
// free there is no setup and nothing is kept (TestPlanStepsFirstsOnTop).
// On the CPU (bench/results/cpu-firsts-2026-12-06-s40.md): the 24 traces
// at scale 1 from 4 above 1.02 (mean 1.0116, max 1.0390) to 3 (1.0087,
// 1.0357: char-b48 1.0256 to 1.0113, deep 1.0390 to 1.0357, small 1.0351
// and wide 1.0212 unchanged, none worse by more than 0.0015); 40 scales
// of the 12 traces from 83 replays above 1.02 to 58 (mean 1.0122 to
// 1.0097), of the held-out 12 from 197 to 157 (1.0241 to 1.0211); 60
// other scales of all 24 from 436 to 330 (1.0181 to 1.0150); no new
// maximum. Putting every size allocated before the first free on top,
// freed or not, took small-bf16-ckpt to 1.0505 and 40 scales to 92
// above (activations of a parameter's size stacked up). strata's own
// recorded runs (memory/testdata) make 3 allocations in their device
// pool before its first free (a cuBLAS workspace and two temporaries of
// the parameters' initialisation, which frees them as it goes): the rule
// does not fire there, and they replay as before.
// The lives counted did most of it (1.0127, 1.086, 90 over the 40
// scales); the decision declines few plans (one each in 2 of the 12
// traces at scale 1: gpt2-b4-fp32, mid-fp16-ckpt, where it keeps the
// last step from mapping one page more), and it does not make the plans
// choose themselves wherever they lose: two fp32 traces stay a little
// better without plans over the scales (trace-gpt2-b4-fp32 1.0039
// against 1.0060, trace-mid-fp32 1.0049 against 1.0083), and single
// scales move both ways (trace-char-fp16-ckpt x0.5: 1.0146 to 1.0201).
// Tried and dropped: declining any plan whose layout's peak does not
// beat the peak (pages live blocks touch, measured) of the last period
// without a plan declined most plans of the first steps, whose layouts
// of part-steps overstate their peak, and made things worse (mean
// 1.0228, 153 above 1.02, before the lives were counted); comparing it
// with the same items placed by a best-fit model declined almost none
// (both peaks are the period's whole bytes live at once, give or take
// a few pages). It costs time: a layout takes a few milliseconds, made
// a few times before the steps settle into reusing the same few, so a
// call took about 2 us on the 4-step replays (0.12 to 0.2 without
// plans), about 0.65 us on a long run (0.2); and sweeping stale ranges
// synchronises the device (about 17 times a step on the fp16 trace's
// steps repeated, against 1). On a loaded 2-core host (2026-12-06,
// bench-alloc -device cpu -no-bench -segments expandable -reps 5 over
// the 12 traces, by call, with the pages' mmap calls) a call took 0.65
// to 0.72 us without plans, 6.2 to 6.6 us with the plans as they were
// and 12.4 to 12.6 us now: the second order's layouts, made for most
// plans of a 4-step replay (trace-gpt2-bf16, 39 plans: 48.8 us against
// 9.5). Plans settle in long runs (below), where the layouts come from
// the cache and cost no time a step.
//
// Bounds (session 37), so that plans can be on by default (a CUDA
// manager's device tier, Config.PlanSteps' PlanDefault):
//
//   - Work: a layout's time grows as its items times its items and
//     obstacles (layoutWith scans the spans placed for each item; about
//     4 ns each on a 2-core host). The planner has planBurst of that
//     work in hand at first and gains planCredit with each allocation, up
//     to planBurst; a layout is made only with some in hand, and spends
//     its work (stepPlanner.afford); without, the plan that follows one
//     run to its end is still made from a layout in the cache, which
//     costs none. Goroutines interleaving their steps
//     in one pool (nn's TestCheckpointConcurrent with plans on) made
//     repetitions whose plans deviated within a few allocations, each
//     followed by the layout of a new period of up to 10,800 allocations:
//     57 s for 14,400 allocations with the pool held
//     (TestPlanStepsBoundTheirWork), now 1 s. The 4-step traces use at
//     most a third of the burst (trace-gpt2-bf16, 39 layouts): their
//     replays are unchanged.
//   - Periods: none above planMaxPeriod allocations is planned.
//   - Runs that do not repeat: once no repetition of a period up to
//     planMaxPeriod was found for planHistory allocations (repeats), small
//     requests no longer go after the highest live block (takeTop grew
//     the segment at its top while free blocks fit below, mapping and
//     unmapping pages all along: the CUDA manager's mixed pair went from
//     0.2 to 4-5 us), only one window in planSparse is looked up, and the
//     planner sleeps (stepPlanner.toggle): it keeps no live blocks by
//     address and records no frees, the most of its cost a call there
//     (BenchmarkPoolPair's mixed-planned pair from 213-219 to 128-130 ns
//     on a 2-core host with the two generations below, against 95-98
//     without plans; the CUDA manager's mixed pair on one H100 host from
//     372-412 to 248-275 ns, 211 with plans off; session 39). A
//     repetition found wakes it: the pool's live blocks are entered
//     again, and periods are planned from there on.
//   - Recording: the window's hash is rolled (no loop a call), the live
//     blocks are searched by address in a slice of addresses (a binary
//     search without branches, lowerBound: the planned
//     mixed pair of BenchmarkPoolPair from 261-276 to 219-224 ns on a
//     2-core host, session 38), a free
//     leaves a tombstone there that the next allocation at or beside it
//     reuses (no slice moved: training allocates where it freed; the
//     settled eager gpt2 replay's planner cost went from 270 to 138 ns a
//     call on a 2-core host), the windows' ends are kept in two maps by
//     generation, the older dropped whole when the history is trimmed
//     (walking the map to cut it down was a twelfth of the planned mixed
//     pair), a plan's page needs are kept with its layout in the cache
//     (pageNeeds), and a planner that stopped for good records nothing.
//     A planned placement searches the live blocks once (placeAt carves
//     the block it found when the range is free and mapped; it searched
//     three times: a planned pool's 64 MiB pair from 88 to 65-71 ns on
//     a 2-core host). What is left costs the CUDA manager's pair 0-15
//     ns on 4 KiB and 1 MiB, 59 on 64 MiB and 35 on random sizes on one
//     H100 host (bench/results/gpu-s39.md, call 4); live training on the
//     H100 runs at the same speed with and without plans.

// Tuning of the plans.
const (
	// planWindow is the number of allocations whose repetition starts a
	// plan.
	planWindow = 32
	// planMinPeriod is the shortest repetition planned.
	planMinPeriod = 256
	// planHistory bounds the allocations remembered (twice that, before
	// the older half goes).
	planHistory = 1 << 15
	// planOccurrences bounds the earlier ends of each window remembered.
	planOccurrences = 32
	// planSparse: a planner that found no repetition for planHistory
	// allocations looks up one window in planSparse (find; 1<<3, the
	// bits it tests).
	planSparse = 8
	// planCached is the number of layouts kept.
	planCached = 4
	// planMaxPeriod is the longest repetition planned: a layout's time
	// grows as the square of its allocations (about 0.25 s for 10,000 on
	// a 2-core host), with the pool held.
	planMaxPeriod = 1 << 14
	// planBurst is the work of layouts (items times items and obstacles,
	// about 4.6 ns each on a 2-core host: layoutWith scans the spans placed
	// for each item) the planner may do at once: it is the most it has in
	// hand, and what it starts with ...
	planBurst = 1 << 28
	// ... and planCredit is what each allocation adds to it. A layout is
	// made only when the planner has some in hand, and spends its work
	// (stepPlanner.afford).
	planCredit = 1 << 6
	// planSlack bounds the allocations a plan skips to find the one that
	// comes, and those it does not expect in a row.
	planSlack = 8
	// planSettleRuns is the plans in a row, each run to its end and
	// followed by the plan of what it saw, after which the planner has
	// settled: it lays out compactly.
	planSettleRuns = 3
	// planGiveUp is the settled plans in a row that mapped pages (or
	// were declined) after which the planner stops for good.
	planGiveUp = 8
	// planSettleGrow: a settled plan's footprint, with the pool's other
	// pages, may pass the pool's peak reserved bytes by 1/planSettleGrow
	// of them (its missing pages are created once).
	planSettleGrow = 64
	// planSetup is the fewest allocations before a pool's first free that
	// make a setup (a model's parameters, created one after another):
	// with fewer, the sizes of the first allocations say nothing
	// (stepPlanner.firsts).
	planSetup = 16
)

// stepPlanner is an expandable pool's record of its allocations and its
// current plan.
type stepPlanner struct {
	clock   int64 // allocations made
	base    int64 // clock of sizes[0]
	sizes   []int64
	streams []Stream
	freed   []int64 // clock at each allocation's free, -1 while live
	// The live blocks by address: each block, its address (searched
	// without loading the blocks) and the clock of its allocation. A
	// block freed leaves a tombstone (a nil block, its address kept for
	// the order), which a block allocated at or beside it reuses without
	// moving the others (training allocates where it freed); dead counts
	// them, and past half of the entries they are swept out (record).
	byAddr []*Block
	addrs  []uintptr
	clocks []int64
	dead   int
	// seen holds each window's latest ends (up to planOccurrences), by
	// its hash, recorded since the last trim; older those recorded
	// before (trim drops it whole: a map walked and cut down every trim
	// was a twelfth of a planned mixed pair).
	seen, older map[uint64][]int64
	hash        uint64 // of the last planWindow allocations (roll)
	// repeated is the clock when find last found a repetition.
	repeated int64
	// dormant: the run stopped repeating (repeats), so the live blocks
	// by address and the frees' clocks are not kept (toggle); woke is the
	// clock from which they are kept again (planForever while dormant):
	// a period is planned only when it starts there or later (detect).
	dormant bool
	woke    int64
	plan    *stepPlan
	// firsts holds the sizes above SmallSize of the pool's allocations
	// made before its first free (freedAny), less each size freed since:
	// a model's parameters, created before its first step. While no plan
	// runs, a request of such a size (the first step's gradients and the
	// optimizer's moments, which live as long) goes right after the
	// highest live block (takeTop), beside the others, where the best fit
	// scatters them among the first step's short-lived blocks and leaves
	// pages that no later layout fills (TestPlanStepsLayoutHeadroom). A
	// size that is freed (an activation of a parameter's size) leaves.
	firsts   map[int64]struct{}
	freedAny bool
	// quiet is the clock before which no plan is made: a plan was
	// declined, and the usual placement serves a period; planForever
	// once the planner stopped for good (off).
	quiet int64
	cache [planCached]planCache
	used  int
	// runs counts the plans in a row that ran to their end; settled is set
	// once planSettleRuns did (for good): layouts are then compact, and
	// steal spares every page the running plan uses. moved counts the
	// settled plans in a row that mapped pages; the planner stops for
	// good (off) when planGiveUp did: no more plans.
	runs, moved int
	// work is the work of layouts in hand at clock workAt (see
	// planBurst; negative after a layout that cost more than there was).
	work, workAt int64
	settled      bool
	// Counts for tests and the replay tool: plans made, layouts computed,
	// allocations placed by a plan, plans ended by a deviation, plans
	// declined, the work of the layouts (see planBurst).
	plans, layouts, planned, deviations, declined, spent int64
}

// stop stops planning for good (see planGiveUp): the usual placement
// serves every allocation from now on, with no takeTop, and nothing is
// recorded (the record is dropped; the counts stay).
func (sp *stepPlanner) stop() {
	*sp = stepPlanner{quiet: planForever, clock: sp.clock, settled: sp.settled,
		plans: sp.plans, layouts: sp.layouts, planned: sp.planned, deviations: sp.deviations,
		declined: sp.declined, spent: sp.spent}
}

// off reports whether the planner stopped for good (stop).
func (sp *stepPlanner) off() bool { return sp.quiet == planForever }

// ended records that the running plan ended before its end (a deviation,
// its segment released): the runs in a row start again.
func (sp *stepPlanner) ended() {
	sp.plan = nil
	sp.runs = 0
}

// topping reports whether a small request with no plan running goes
// after the highest live block (takeTop): not while a plan was declined
// (stepPlanner.quiet), and only in a run that repeats: in its first
// planHistory allocations, or within planHistory of a repetition found.
// Allocations that never repeat (random sizes, say) would otherwise keep
// growing the segment at its top while free blocks fit below, mapping
// and unmapping pages all along: the CUDA manager's mixed pair took 4.2
// to 5.1 us instead of 0.23 to 0.35 (bench-alloc, H100 host).
func (sp *stepPlanner) topping() bool {
	return sp.clock >= sp.quiet && sp.repeats()
}

// first reports whether requests of rounded bytes go on top while no
// plan runs as a model's parameters' kin (see firsts).
func (sp *stepPlanner) first(rounded int64) bool {
	_, ok := sp.firsts[rounded]
	return ok
}

// repeats reports whether the run repeats, as far as the planner knows:
// it is in its first planHistory allocations, or found a repetition it
// could plan (a period up to planMaxPeriod) within the last planHistory.
func (sp *stepPlanner) repeats() bool {
	return sp.clock < planHistory || sp.clock-sp.repeated < planHistory
}

// deviated ends the running plan, which the allocations stopped
// following.
func (sp *stepPlanner) deviated() {
	sp.ended()
	sp.deviations++
}

// afford reports whether the planner has work in hand for a layout (see
// planBurst): what it had at the last layout, and planCredit for each
// allocation since, up to planBurst.
func (sp *stepPlanner) afford() bool {
	sp.work = min(planBurst, sp.work+planCredit*(sp.clock-sp.workAt))
	sp.workAt = sp.clock
	return sp.work > 0
}

// planCache is a layout and the hash of its items and obstacles.
type planCache struct {
	key         uint64
	items       []planItem
	fixed       []planFixed
	limit, page int64
	offs        []int64
	peak        int64   // planPeak of the layout
	foot        int64   // planFoot of the layout
	compact     bool    // made by layoutWith's compact mode
	need        []int32 // stepPlan.need of the layout, once a plan used it (pageNeeds)
}

// allocated records that b was allocated for a request of rounded bytes
// on stream s (b is not split nor marked live yet), and plans on: the
// next period when the running plan has just ended, else when a
// repetition is found.
func (sp *stepPlanner) allocated(p *Pool, b *Block, rounded int64, s Stream) {
	if sp.off() {
		sp.clock++
		return
	}
	if sp.seen == nil {
		sp.seen = map[uint64][]int64{}
		sp.work = planBurst
	}
	if sp.repeats() == sp.dormant { // it stopped or started repeating
		sp.toggle(p)
	}
	if !sp.dormant {
		sp.record(b)
	}
	if !sp.freedAny && rounded > SmallSize {
		if sp.firsts == nil {
			sp.firsts = map[int64]struct{}{}
		}
		sp.firsts[rounded] = struct{}{}
	}
	sp.sizes = append(sp.sizes, rounded)
	sp.streams = append(sp.streams, s)
	sp.freed = append(sp.freed, -1)
	sp.clock++
	sp.roll()
	if len(sp.sizes) >= 2*planHistory {
		sp.trim()
	}
	if b.seg.x == nil || p.cfg.MaxSplitSize != 0 {
		return
	}
	if pl := sp.plan; pl != nil && pl.next == len(pl.sizes) {
		sp.plan = nil
		sp.runs++
		sp.repeated = sp.clock // the run repeated what it planned
		if sp.settled {
			// A settled plan runs in the pages it had: one that still maps
			// pages, planGiveUp periods in a row, will not settle.
			if pl.maps > 0 {
				sp.moved++
			} else {
				sp.moved = 0
			}
			if sp.moved >= planGiveUp {
				sp.stop()
				return
			}
		}
		if sp.runs >= planSettleRuns {
			sp.settled = true
		}
		if pl.seg == b.seg && pl.start >= sp.base && sp.clock-pl.start <= planMaxPeriod {
			// Recorded, so that a detection a period on (after a
			// decline) finds this period, not one before the plans.
			// (Requests it did not expect, up to planSlack after each
			// it did, can make the period it saw longer than its own:
			// none above planMaxPeriod is planned.)
			sp.find()
			sp.plan = sp.makePlan(p, b, rounded, pl.start, sp.clock, true)
			return
		}
		sp.runs = 0
	}
	if sp.plan == nil {
		sp.detect(p, b, rounded)
	}
}

// toggle puts the planner to sleep when its run stopped repeating, and
// wakes it when the run repeats again. Asleep (dormant), it keeps no
// live blocks by address and no frees' clocks: a run that never repeats
// (random sizes) paid for both on every call, for plans it never makes
// (two searches of the live blocks, the most of the planner's cost on
// the mixed pair). It still records sizes and streams and looks up one
// window in planSparse, so it sees a repetition come; it then wakes: the
// live blocks of the pool's segments are entered again, with no clock
// (they are taken to live for ever), and a period is planned only from
// there on (woke), since the frees before were not recorded. Pending
// blocks (freed, their streams' work not done) are not entered: they
// were released already, and their reclaim does not release them again,
// so their entries would stay while their structs were recycled
// elsewhere in the segment, and blockAt would start from a block above
// the address it looks up (session 40's reviewer: placeAt then handed out
// a hole, unmapped; TestPlanStepsWakeWithPendingBlocks). makePlan takes
// them as obstacles from the segment's walk.
func (sp *stepPlanner) toggle(p *Pool) {
	if sp.dormant = !sp.dormant; sp.dormant {
		if sp.plan != nil { // its records stop: it ends here
			sp.ended()
		}
		clear(sp.byAddr)
		sp.byAddr, sp.addrs, sp.clocks, sp.dead, sp.woke = sp.byAddr[:0], sp.addrs[:0], sp.clocks[:0], 0, planForever
		return
	}
	for seg := p.segs; seg != nil; seg = seg.next {
		for b := seg.first; b != nil; b = b.next {
			if b.state == blockLive {
				sp.byAddr = append(sp.byAddr, b)
			}
		}
	}
	slices.SortFunc(sp.byAddr, func(x, y *Block) int { return cmp.Compare(x.addr, y.addr) })
	for _, b := range sp.byAddr {
		sp.addrs = append(sp.addrs, b.addr)
		sp.clocks = append(sp.clocks, -1)
	}
	sp.woke = sp.clock
}

// released records the free of b.
func (sp *stepPlanner) released(b *Block) {
	if b.requested > 0 { // not an allocation undone (Pool.alloc's advice)
		if !sp.freedAny && sp.clock < planSetup {
			sp.firsts = nil // no setup: a step's allocations
		}
		sp.freedAny = true
		if len(sp.firsts) > 0 {
			delete(sp.firsts, RoundSize(b.requested))
		}
	}
	if sp.dormant {
		return
	}
	i, found := sp.search(b.addr)
	if !found || sp.byAddr[i] != b {
		return
	}
	c := sp.clocks[i]
	sp.byAddr[i] = nil // a tombstone (see byAddr)
	if sp.dead++; sp.dead > 32 && 2*sp.dead > len(sp.byAddr) {
		k := 0
		for j, x := range sp.byAddr {
			if x != nil {
				sp.byAddr[k], sp.addrs[k], sp.clocks[k] = x, sp.addrs[j], sp.clocks[j]
				k++
			}
		}
		clear(sp.byAddr[k:])
		sp.byAddr, sp.addrs, sp.clocks, sp.dead = sp.byAddr[:k], sp.addrs[:k], sp.clocks[:k], 0
	}
	if c >= sp.base {
		sp.freed[c-sp.base] = sp.clock
	}
}

// record enters live block b, allocated now, among the live blocks by
// address: in a tombstone at its address or beside where it goes (the
// order holds: the tombstone's neighbours are below and above b), else
// inserted.
func (sp *stepPlanner) record(b *Block) {
	i, found := sp.search(b.addr)
	switch {
	case found:
		if sp.byAddr[i] != nil { // not a tombstone (live blocks do not share an address)
			sp.byAddr[i], sp.clocks[i] = b, sp.clock
			return
		}
	case i > 0 && sp.byAddr[i-1] == nil:
		i--
	case i < len(sp.byAddr) && sp.byAddr[i] == nil:
	default:
		sp.byAddr = slices.Insert(sp.byAddr, i, b)
		sp.addrs = slices.Insert(sp.addrs, i, b.addr)
		sp.clocks = slices.Insert(sp.clocks, i, sp.clock)
		return
	}
	sp.byAddr[i], sp.addrs[i], sp.clocks[i] = b, b.addr, sp.clock
	sp.dead--
}

// liveSince returns the clock of live block b's allocation, false when
// b was not recorded.
func (sp *stepPlanner) liveSince(b *Block) (int64, bool) {
	if i, found := sp.search(b.addr); found && sp.byAddr[i] == b {
		return sp.clocks[i], true
	}
	return 0, false
}

// trim forgets the older half of the history.
func (sp *stepPlanner) trim() {
	sp.base += planHistory
	sp.sizes = append(sp.sizes[:0], sp.sizes[planHistory:]...)
	sp.streams = append(sp.streams[:0], sp.streams[planHistory:]...)
	sp.freed = append(sp.freed[:0], sp.freed[planHistory:]...)
	// The windows recorded before the last trim end before the new base
	// (those since, up to planWindow after it, are skipped by find).
	if sp.older == nil {
		sp.older = map[uint64][]int64{}
	}
	clear(sp.older)
	sp.seen, sp.older = sp.older, sp.seen
}

// The window's hash is rolled along the allocations: each multiplies it
// by rollMul and adds its term, and the term of the one planWindow back,
// times rollMul^planWindow, is taken off; so it costs no loop (a match is
// confirmed by sameWindow).
const rollMul = 1099511628211

// rollTop is rollMul^planWindow, mod 2^64.
var rollTop = func() uint64 {
	v := uint64(1)
	for range planWindow {
		v *= rollMul
	}
	return v
}()

// rollTerm is an allocation's term in the window's hash.
func rollTerm(size int64, s Stream) uint64 {
	return uint64(size)*0x9e3779b97f4a7c15 ^ uint64(s)
}

// roll adds the allocation just recorded (the last of the history) to
// the window's hash, taking off the one planWindow back.
func (sp *stepPlanner) roll() {
	n := len(sp.sizes)
	sp.hash = sp.hash*rollMul + rollTerm(sp.sizes[n-1], sp.streams[n-1])
	if n > planWindow {
		sp.hash -= rollTop * rollTerm(sp.sizes[n-1-planWindow], sp.streams[n-1-planWindow])
	}
}

// sameWindow reports whether the windows before clocks a and b match.
func (sp *stepPlanner) sameWindow(a, b int64) bool {
	for i := range int64(planWindow) {
		x, y := a-planWindow+i-sp.base, b-planWindow+i-sp.base
		if sp.sizes[x] != sp.sizes[y] || sp.streams[x] != sp.streams[y] {
			return false
		}
	}
	return true
}

// detect looks for the window before now earlier in the history and,
// found at least planMinPeriod allocations back, plans what followed it
// in the segment of b, the block just allocated for rounded bytes.
func (sp *stepPlanner) detect(p *Pool, b *Block, rounded int64) {
	if from := sp.find(); from >= sp.woke && sp.clock >= sp.quiet && sp.clock-from <= planMaxPeriod {
		sp.plan = sp.makePlan(p, b, rounded, from, sp.clock, false)
	}
}

// find records the window before now and returns the clock after its
// latest earlier occurrence at least planMinPeriod back, -1 for none.
func (sp *stepPlanner) find() int64 {
	t := sp.clock
	if t-sp.base < planWindow {
		return -1
	}
	h := sp.hash
	if !sp.repeats() && (h*0x9e3779b97f4a7c15)>>61 != 0 {
		// No repetition for long: only windows whose hash's top bits,
		// mixed, are 0 (one in planSparse) are looked up and recorded
		// (both ends of a repetition are, or neither), so a run that
		// never repeats pays the map a call in planSparse.
		return -1
	}
	ends := sp.seen[h]
	from := sp.latest(ends, t)
	if from < 0 && sp.older != nil {
		from = sp.latest(sp.older[h], t)
	}
	if from >= 0 && t-from <= planMaxPeriod {
		sp.repeated = t
	}
	if len(ends) == planOccurrences {
		ends = append(ends[:0], ends[1:]...)
	}
	sp.seen[h] = append(ends, t)
	return from
}

// latest returns the latest of ends (a window's ends, in order) at
// least planMinPeriod before t whose window is in the history and equals
// the window before t; -1 for none.
func (sp *stepPlanner) latest(ends []int64, t int64) int64 {
	for i := len(ends) - 1; i >= 0; i-- {
		if e := ends[i]; t-e >= planMinPeriod && e-planWindow >= sp.base && sp.sameWindow(e, t) {
			return e
		}
	}
	return -1
}

// makePlan lays out the allocations of history [from, t) as those of
// [t, 2t-from), on the stream of the last allocation, last (of rounded
// bytes, not yet split nor live), in its segment. A plan that follows
// one run to its end (after) is declined, nil, when its layout needs
// more pages at its peak than the segment has mapped: the next period
// is then placed as usual (see above).
func (sp *stepPlanner) makePlan(p *Pool, last *Block, rounded, from, t int64, after bool) *stepPlan {
	// Without work in hand only the plan of what a plan saw is made, and
	// only from a layout in the cache (which costs none): the steps of a
	// run repeat, so the chain of plans goes on while its layouts repeat.
	afford := sp.afford()
	if !afford && !after {
		return nil
	}
	seg := last.seg
	period := t - from
	s := sp.streams[t-1-sp.base]
	items := make([]planItem, 0, period) // each item's from is its place in the period
	for k := from; k < t; k++ {
		i := k - sp.base
		if sp.streams[i] != s {
			continue
		}
		to := planForever
		if f := sp.freed[i]; f >= 0 {
			to = f - from
		} else if j := i - period; j >= 0 && sp.freed[j] >= 0 && sp.freed[j]+period >= t {
			to = sp.freed[j] + period - from
		}
		items = append(items, planItem{size: sp.sizes[i], from: k - from, to: to})
	}
	items = dropOneOffs(items, sp.base+period-from)
	var fixed []planFixed
	base := seg.region.Addr
	for b := seg.first; b != nil; b = b.next {
		size := b.size
		if b == last {
			size = rounded
		} else if b.state != blockLive && b.state != blockPending {
			continue
		}
		to := planForever
		if c, ok := sp.liveSince(b); ok && b.state != blockPending && c >= t-period {
			// Its counterpart a period before: when did that one die?
			if i := c - period - sp.base; i >= 0 {
				if f := sp.freed[i]; f >= 0 && f+period >= t {
					to = f + period - t
				}
			}
		}
		fixed = append(fixed, planFixed{off: int64(b.addr - base), size: size, to: to})
	}
	mapped := seg.mapped / p.page
	var offs []int64
	var peak, foot int64
	if afford {
		offs, peak, foot = sp.layout(items, fixed, seg.region.Size, p.page, mapped)
	} else {
		// The cache only, looked up once (layout would look it up again).
		var ok bool
		if offs, peak, foot, ok = sp.cached(items, fixed, seg.region.Size, p.page); !ok {
			return nil
		}
	}
	if planLaidOut != nil {
		planLaidOut(items, offs, fixed, peak, mapped, p.page)
	}
	// A settled plan keeps the pages of its footprint: with the pool's
	// other pages, they must fit in its peak reserved bytes (and a little).
	u := &p.sinks.own.Reserved
	room := u.Peak + u.Peak/planSettleGrow - (u.Current - seg.mapped)
	if !sp.settled && after && peak > mapped || sp.settled && foot*p.page > room {
		// The steps already ran in the pages mapped; this layout would
		// take more (a settled one, which keeps its pages, more than the
		// pool's peak): the usual placement serves the next period.
		sp.declined++
		sp.quiet = t + period
		sp.runs = 0
		if sp.settled {
			if sp.moved++; sp.moved >= planGiveUp {
				sp.stop()
			}
		}
		return nil
	}
	// Address space whose pages were lent elsewhere is swept now, once a
	// period, rather than as the plan finds it (not while a held stream, a
	// graph's capture, plans: no synchronisation then).
	if !heldBy(p.holder(), s) {
		_ = p.sweepStale()
	}
	plan := &stepPlan{seg: seg, stream: s, start: t, sizes: make([]int64, period), offs: make([]int64, period)}
	for i := range plan.offs {
		plan.offs[i] = -1
		plan.sizes[i] = sp.sizes[from+int64(i)-sp.base]
	}
	for j, it := range items {
		plan.offs[it.from] = offs[j]
	}
	plan.need = sp.pageNeeds(items, offs, p.page)
	sp.plans++
	return plan
}

// planOneOffRun is the fewest allocations in a row, live for ever and
// with no counterpart in the history, that a layout leaves out
// (dropOneOffs).
const planOneOffRun = 8

// dropOneOffs filters items (a period's, in order; in place) of the runs of
// planOneOffRun or more in a row that live for ever and have no
// counterpart a period before in the history (an item whose from is
// below unseen): a first step's one-offs, the optimizer's moments and the
// like, made once, one parameter after another, and kept (their
// requests, if they come, are placed as usual: offs -1). A repeating
// step frees what it allocates; what it keeps does not come again, and
// laid out, it took room that the first plans' layouts packed the step's
// own blocks around: a PyTorch trace of a wide model (held out) peaked
// 7.8 pages (2 MiB) over the bytes live under such plans, 1.0212
// reserved / requested, 1.0049 with the runs left out. Single items are
// kept: a block made late in one step and freed early in the next (live
// at the plan, with no counterpart yet in a first plan) recurs, and
// leaving those out kept a synthetic run's settled plans mapping pages
// until the planner gave up (TestPlanStepsSettleAndGiveUp). The replays
// and scale sweeps: bench/results/cpu-oneoff-2026-12-06-s41.md. Session 41
// took it out again for strata's live gpt2 run (1.0108 -> 1.0173 peak
// reserved / allocated on the H100); session 42's recording of that run
// (TestPlanStepsLiveRecordings) showed why: the first plans, tighter
// with the runs left out, left the pool with no page to spare when the
// planner settled, and its first settled plan, 2 pages short, was
// declined by the rule for plans before settling; that rule no longer
// applies once settled (bench/results/cpu-oneoff-live-2026-12-06-s42.md).
func dropOneOffs(items []planItem, unseen int64) []planItem {
	out := items[:0]
	for a := 0; a < len(items); {
		b := a
		for b < len(items) && items[b].to == planForever && items[b].from < unseen {
			b++
		}
		switch {
		case b-a >= planOneOffRun:
		case b == a:
			out = append(out, items[a])
			b++
		default:
			out = append(out, items[a:b]...)
		}
		a = b
	}
	return out
}

// pageNeeds returns stepPlan.need for the layout offs of items (an
// item's from is its place in the period): the last item on each page.
// It is kept with the layout in the cache, so the plans that reuse a
// layout, one a period, do not walk every page of every item again (with
// makePlan's slices sized once: a planned pool's 64 MiB pair from 121 to
// 93 ns on a 2-core host, 26 unplanned; a plan of 256 such items walked
// 8,192 pages).
func (sp *stepPlanner) pageNeeds(items []planItem, offs []int64, page int64) []int32 {
	var c *planCache
	for k := range sp.cache {
		if e := &sp.cache[k]; len(offs) > 0 && len(e.offs) == len(offs) && &e.offs[0] == &offs[0] {
			c = e
			break
		}
	}
	if c != nil && c.need != nil {
		return c.need
	}
	var need []int32
	for j, it := range items {
		if o := offs[j]; o >= 0 {
			first, last := o/page, (o+it.size-1)/page
			for int64(len(need)) <= last {
				need = append(need, -1)
			}
			for pg := first; pg <= last; pg++ {
				need[pg] = int32(max(int64(need[pg]), it.from))
			}
		}
	}
	if c != nil {
		c.need = need
	}
	return need
}

// planLaidOut, when set (by TestPlanStepsTraceDiag), is told of each
// layout makePlan has: its items and obstacles, its peak and the pages
// mapped, in pages of page bytes.
var planLaidOut func(items []planItem, offs []int64, fixed []planFixed, peak, mapped, page int64)

// layout is layoutPlan (layoutWith's compact mode once the planner settled), the
// layout's planPeak and planFoot, or the same layout made before. When
// that layout needs more than mapped pages at its peak (settled: in its
// footprint), the other order of layoutWith is tried too, and the
// layout with fewer such pages kept (the first among equals).
func (sp *stepPlanner) layout(items []planItem, fixed []planFixed, limit, page, mapped int64) ([]int64, int64, int64) {
	if offs, peak, foot, ok := sp.cached(items, fixed, limit, page); ok {
		return offs, peak, foot
	}
	compact := sp.settled
	// What a layout holds: its peak, or its footprint once settled.
	holds := func(offs []int64) (peak, foot, held int64) {
		peak, foot = planPeak(items, offs, fixed, page), planFoot(items, offs, fixed, page)
		if compact {
			return peak, foot, foot
		}
		return peak, foot, peak
	}
	cost := int64(len(items)) * int64(len(items)+len(fixed))
	sp.work -= cost
	sp.spent += cost
	offs := layoutWith(items, fixed, limit, page, planByPressure, compact)
	peak, foot, held := holds(offs)
	for by := planByPressure + 1; by < planOrders && held > mapped; by++ {
		sp.work -= cost
		sp.spent += cost
		o := layoutWith(items, fixed, limit, page, by, compact)
		if pk, ft, h := holds(o); h < held {
			offs, peak, foot, held = o, pk, ft, h
		}
	}
	sp.cache[sp.used%planCached] = planCache{planKey(items, fixed), slices.Clone(items), slices.Clone(fixed), limit, page, offs, peak, foot, compact, nil}
	sp.used++
	sp.layouts++
	return offs, peak, foot
}

// cached returns the layout of items around fixed made before (in the
// mode the planner lays out in now), its planPeak and planFoot, and
// whether there is one.
func (sp *stepPlanner) cached(items []planItem, fixed []planFixed, limit, page int64) ([]int64, int64, int64, bool) {
	key := planKey(items, fixed)
	for _, c := range sp.cache {
		// The hash finds it; the whole input decides (a collision, or the
		// same items in a segment of another size, is another layout).
		if c.offs != nil && c.key == key && c.limit == limit && c.page == page && c.compact == sp.settled &&
			slices.Equal(c.items, items) && slices.Equal(c.fixed, fixed) {
			return c.offs, c.peak, c.foot, true
		}
	}
	return nil, 0, 0, false
}

// planKey hashes a layout's items and obstacles.
func planKey(items []planItem, fixed []planFixed) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v int64) { h = (h ^ uint64(v)) * 1099511628211 }
	for _, it := range items {
		mix(it.size)
		mix(it.from)
		mix(it.to)
	}
	mix(-1)
	for _, f := range fixed {
		mix(f.off)
		mix(f.size)
		mix(f.to)
	}
	return h
}

// search finds address a among the live blocks by address: the index of
// the block starting at a, or where one would go, and whether there is one.
func (sp *stepPlanner) search(a uintptr) (int, bool) {
	i := lowerBound(sp.addrs, a)
	return i, i < len(sp.addrs) && sp.addrs[i] == a
}

// lowerBound returns the index of the first element of sorted x not
// below a (len(x) if none). Each halving picks its half without a branch
// (the compare's flag, a SETcc, masks the step): on addresses, where
// either half is as likely,
// slices.BinarySearch's branch was mispredicted about every other step,
// and its searches were a quarter of a planned pool's mixed pair (two a
// pair: the allocation's record and the free's).
func lowerBound(x []uintptr, a uintptr) int {
	lo, n := 0, len(x)
	for n > 1 {
		half := n >> 1
		var below int // 1 when the lower half ends below a (a SETcc)
		if x[lo+half-1] < a {
			below = 1
		}
		lo += half & -below
		n -= half
	}
	if n == 1 && x[lo] < a {
		lo++
	}
	return lo
}

// blockAt is blockAt(seg, a), walking from the live block below a.
func (sp *stepPlanner) blockAt(seg *segment, a uintptr) *Block {
	b := seg.first
	i, found := sp.search(a)
	if !found || sp.byAddr[i] == nil {
		i--
	}
	for i >= 0 && sp.byAddr[i] == nil {
		i--
	}
	if i >= 0 && sp.byAddr[i].seg == seg {
		b = sp.byAddr[i]
	}
	for ; b != nil; b = b.next {
		if a < b.addr+uintptr(b.size) {
			return b
		}
	}
	return nil
}
