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
//     counterpart a period before did, if that one died), are laid out in
//     its segment (layoutPlan) around the blocks live now, which stay
//     where they are (those allocated within the last period taken to die
//     as their counterparts did, the others to live for ever). Steps
//     alternate between a few layouts, so the last planCached are kept
//     and one is reused when the same blocks are laid out around the same
//     obstacles.
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
//     followed at once by the plan of the allocations it saw.
//
// A plan only chooses an address among free ones, so a wrong prediction
// costs memory, never correctness. On PyTorch's traces scaled by 0.2 to 4
// (40 scales; bench/results/cpu-expandable-scaled-2026-12-03-s18.md) it
// took the fp16 trace with checkpointing from a mean peak
// reserved/requested of 1.056 to 1.010 (max 1.147 to 1.031, 30 scales
// above 1.02 to 3), and fp32 from 1.0047 to 1.0038 (max 1.018 to 1.016);
// on 60 other scales fp16 1.053 to 1.010 (47 above 1.02 to 3), fp32
// 1.0050 to 1.0035 (1 to 0). It costs time: a layout takes a few
// milliseconds, made a few times before the steps settle into reusing
// the same few, so a call takes about 2 us on the 4-step replays (0.12
// to 0.2 without plans), about 0.65 us on a long run (0.2); and sweeping
// stale ranges synchronises the device (about 17 times a step on the
// fp16 trace's steps repeated, against 1). So it is off by default
// (PoolConfig.PlanSteps).

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
	// planCached is the number of layouts kept.
	planCached = 4
	// planSlack bounds the allocations a plan skips to find the one that
	// comes, and those it does not expect in a row.
	planSlack = 8
)

// stepPlanner is an expandable pool's record of its allocations and its
// current plan.
type stepPlanner struct {
	clock   int64 // allocations made
	base    int64 // clock of sizes[0]
	sizes   []int64
	streams []Stream
	freed   []int64          // clock at each allocation's free, -1 while live
	live    map[*Block]int64 // the clock of each live block's allocation
	byAddr  []*Block         // the live blocks by address
	seen    map[uint64][]int64
	plan    *stepPlan
	cache   [planCached]planCache
	used    int
	// Counts for tests and the replay tool: plans made, layouts computed,
	// allocations placed by a plan, plans ended by a deviation.
	plans, layouts, planned, deviations int64
}

// planCache is a layout and the hash of its items and obstacles.
type planCache struct {
	key         uint64
	items       []planItem
	fixed       []planFixed
	limit, page int64
	offs        []int64
}

// allocated records that b was allocated for a request of rounded bytes
// on stream s (b is not split nor marked live yet), and plans on: the
// next period when the running plan has just ended, else when a
// repetition is found.
func (sp *stepPlanner) allocated(p *Pool, b *Block, rounded int64, s Stream) {
	if sp.live == nil {
		sp.live = map[*Block]int64{}
		sp.seen = map[uint64][]int64{}
	}
	sp.live[b] = sp.clock
	i, _ := sp.search(b.addr)
	sp.byAddr = slices.Insert(sp.byAddr, i, b)
	sp.sizes = append(sp.sizes, rounded)
	sp.streams = append(sp.streams, s)
	sp.freed = append(sp.freed, -1)
	sp.clock++
	if len(sp.sizes) >= 2*planHistory {
		sp.trim()
	}
	if b.seg.x == nil || p.cfg.MaxSplitSize != 0 {
		return
	}
	if pl := sp.plan; pl != nil && pl.next == len(pl.sizes) {
		sp.plan = nil
		if pl.seg == b.seg && pl.start >= sp.base {
			sp.plan = sp.makePlan(p, b, rounded, pl.start, sp.clock)
			return
		}
	}
	if sp.plan == nil {
		sp.detect(p, b, rounded)
	}
}

// released records the free of b.
func (sp *stepPlanner) released(b *Block) {
	c, ok := sp.live[b]
	if !ok {
		return
	}
	delete(sp.live, b)
	if i, found := sp.search(b.addr); found {
		sp.byAddr = slices.Delete(sp.byAddr, i, i+1)
	}
	if c >= sp.base {
		sp.freed[c-sp.base] = sp.clock
	}
}

// trim forgets the older half of the history.
func (sp *stepPlanner) trim() {
	sp.base += planHistory
	sp.sizes = append(sp.sizes[:0], sp.sizes[planHistory:]...)
	sp.streams = append(sp.streams[:0], sp.streams[planHistory:]...)
	sp.freed = append(sp.freed[:0], sp.freed[planHistory:]...)
	for h, ends := range sp.seen {
		k := 0
		for _, e := range ends {
			if e-planWindow >= sp.base {
				ends[k] = e
				k++
			}
		}
		if k == 0 {
			delete(sp.seen, h)
		} else {
			sp.seen[h] = ends[:k]
		}
	}
}

// windowHash hashes the sizes and streams of the planWindow allocations
// before clock t.
func (sp *stepPlanner) windowHash(t int64) uint64 {
	h := uint64(14695981039346656037)
	for i := t - planWindow - sp.base; i < t-sp.base; i++ {
		h = (h ^ uint64(sp.sizes[i])) * 1099511628211
		h = (h ^ uint64(sp.streams[i])) * 1099511628211
	}
	return h
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
	t := sp.clock
	if t-sp.base < planWindow {
		return
	}
	h := sp.windowHash(t)
	ends := sp.seen[h]
	from := int64(-1)
	for i := len(ends) - 1; i >= 0; i-- {
		if e := ends[i]; t-e >= planMinPeriod && e-planWindow >= sp.base && sp.sameWindow(e, t) {
			from = e
			break
		}
	}
	if len(ends) == planOccurrences {
		ends = append(ends[:0], ends[1:]...)
	}
	sp.seen[h] = append(ends, t)
	if from >= 0 {
		sp.plan = sp.makePlan(p, b, rounded, from, t)
	}
}

// makePlan lays out the allocations of history [from, t) as those of
// [t, 2t-from), on the stream of the last allocation, last (of rounded
// bytes, not yet split nor live), in its segment.
func (sp *stepPlanner) makePlan(p *Pool, last *Block, rounded, from, t int64) *stepPlan {
	seg := last.seg
	period := t - from
	s := sp.streams[t-1-sp.base]
	var items []planItem
	var which []int
	for k := from; k < t; k++ {
		i := k - sp.base
		if sp.streams[i] != s {
			continue
		}
		to := planForever
		if f := sp.freed[i]; f >= 0 {
			to = f - from
		} else if j := i - period; j >= 0 && sp.freed[j] >= 0 && sp.freed[j]+period > t {
			to = sp.freed[j] + period - from
		}
		items = append(items, planItem{size: sp.sizes[i], from: k - from, to: to})
		which = append(which, int(k-from))
	}
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
		if c, ok := sp.live[b]; ok && b.state != blockPending && c >= t-period {
			// Its counterpart a period before: when did that one die?
			if i := c - period - sp.base; i >= 0 {
				if f := sp.freed[i]; f >= 0 && f+period > t {
					to = f + period - t
				}
			}
		}
		fixed = append(fixed, planFixed{off: int64(b.addr - base), size: size, to: to})
	}
	// Address space whose pages were lent elsewhere is swept now, once a
	// period, rather than as the plan finds it (not while a held stream, a
	// graph's capture, plans: no synchronisation then).
	if !heldBy(p.holder(), s) {
		_ = p.sweepStale()
	}
	offs := sp.layout(items, fixed, seg.region.Size, p.page)
	plan := &stepPlan{seg: seg, stream: s, start: t, sizes: make([]int64, period), offs: make([]int64, period)}
	for i := range plan.offs {
		plan.offs[i] = -1
		plan.sizes[i] = sp.sizes[from+int64(i)-sp.base]
	}
	for j, i := range which {
		plan.offs[i] = offs[j]
		if o := offs[j]; o >= 0 {
			first, last := o/p.page, (o+items[j].size-1)/p.page
			for int64(len(plan.need)) <= last {
				plan.need = append(plan.need, -1)
			}
			for pg := first; pg <= last; pg++ {
				plan.need[pg] = int32(max(int(plan.need[pg]), i))
			}
		}
	}
	sp.plans++
	return plan
}

// layout is layoutPlan, or the same layout made before.
func (sp *stepPlanner) layout(items []planItem, fixed []planFixed, limit, page int64) []int64 {
	key := planKey(items, fixed)
	for _, c := range sp.cache {
		// The hash finds it; the whole input decides (a collision, or the
		// same items in a segment of another size, is another layout).
		if c.offs != nil && c.key == key && c.limit == limit && c.page == page &&
			slices.Equal(c.items, items) && slices.Equal(c.fixed, fixed) {
			return c.offs
		}
	}
	offs := layoutPlan(items, fixed, limit, page)
	sp.cache[sp.used%planCached] = planCache{key, slices.Clone(items), slices.Clone(fixed), limit, page, offs}
	sp.used++
	sp.layouts++
	return offs
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
	return slices.BinarySearchFunc(sp.byAddr, a, func(x *Block, a uintptr) int { return cmp.Compare(x.addr, a) })
}

// blockAt is blockAt(seg, a), walking from the live block below a.
func (sp *stepPlanner) blockAt(seg *segment, a uintptr) *Block {
	b := seg.first
	i, found := sp.search(a)
	if !found {
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
