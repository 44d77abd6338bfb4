package memory

import (
	"cmp"
	"slices"
)

// Offline placement of blocks whose lifetimes are known (the step plans
// of pool_expand_plan.go): dynamic storage allocation over intervals of
// a logical clock, around fixed obstacles (the blocks already live, where
// they are). Items are placed in order of the most bytes live at once
// during their lives (those live at the peak first, in the spirit of
// TFLite's greedy by breadth), then largest first (the earliest born first among
// equals), as TFLite's arena planner and XLA's heap simulator do, but not
// at the lowest offset that fits: what a pool of expandable
// segments holds at a moment is the pages that live blocks touch, so each
// item goes where it adds the least page-time. Pages strictly inside an
// item are its own while it lives; its first and last pages may be
// shared, and the place chosen (the start or the end of a gap where it
// fits, or their first and last page-aligned places) is the one where
// some other block already uses those pages for the longest part of the
// item's life (ties: the lowest offset). Over the 40 scales of PyTorch's
// traces (0.2 to 4), largest first, this took the step plans' mean peak
// reserved over peak requested from 1.0389 (the lowest offset that fits)
// to 1.0324 for the fp16 trace with checkpointing, and from 1.0094 to
// 1.0063 for fp32; placing the items live at the peak first took them to
// 1.0246 and 1.0047. No one order is best for every step: layoutOrdered
// also places them by the bytes live, then the longest life first, and
// planPeak counts the pages a layout holds at its peak, by which a step
// plan picks between the two (pool_expand_plan.go). A settled step plan
// runs its layout in the same pages every step, so it holds the pages the
// layout touches at any time (planFoot), not its peak: layoutWith's compact mode
// places each item where it adds the fewest pages to that footprint
// first.

// planItem is a block to place: size bytes live over [from, to) of the
// allocation clock (to is planForever when it outlives the plan).
type planItem struct{ size, from, to int64 }

// planFixed is address space taken from the plan's start: [off,
// off+size) until to on the allocation clock (planForever: for ever).
type planFixed struct{ off, size, to int64 }

const planForever = int64(1) << 62

// planSpan is bytes [lo, hi) taken over clock [from, to).
type planSpan struct{ lo, hi, from, to int64 }

// layoutPlan returns an offset for each item, in [0, limit) with pages of
// page bytes (see above): no two items live at the same time overlap,
// and no item overlaps an obstacle still there when it is born. An item
// that fits nowhere gets -1.
func layoutPlan(items []planItem, fixed []planFixed, limit, page int64) []int64 {
	return layoutWith(items, fixed, limit, page, planByPressure, false)
}

// The orders in which layoutWith places the items, both greedy: the
// first is layoutPlan's; the other is tried by a step plan whose layout
// in the first needs more pages than its segment has mapped
// (stepPlanner.layout).
const (
	planByPressure     = iota // the most bytes live during its life, then size, then birth
	planByPressureLife        // the most bytes live during its life, then the longest life, then size
	planOrders
)

// layoutWith is layoutPlan with the items placed in the given order
// (planByPressure and the others above); with compact, it keeps the layout's
// footprint low instead (the pages that any of its items or obstacles
// touches, at any time): each item goes where it touches the fewest pages
// that nothing placed before touched, and among those where it adds the
// least page-time. A settled step plan runs its layout every step in the
// same pages, so it holds the footprint, not the peak
// (pool_expand_plan.go).
func layoutWith(items []planItem, fixed []planFixed, limit, page int64, by int, compact bool) []int64 {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	pressure := planPressure(items)
	life := func(it planItem) int64 { return min(it.to, planForever/2) - it.from }
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := items[a], items[b]
		if pressure[a] != pressure[b] {
			return cmp.Compare(pressure[b], pressure[a])
		}
		if by == planByPressureLife {
			if lx, ly := life(x), life(y); lx != ly {
				return cmp.Compare(ly, lx)
			}
			return cmp.Compare(y.size, x.size)
		}
		if x.size != y.size {
			return cmp.Compare(y.size, x.size)
		}
		return cmp.Compare(x.from, y.from)
	})
	l := planLayout{page: page, compact: compact}
	for _, f := range fixed {
		l.add(planSpan{f.off, f.off + f.size, -planForever, f.to})
	}
	offs := make([]int64, len(items))
	for _, i := range order {
		offs[i] = l.place(items[i], limit)
	}
	return offs
}

// planPressure returns, for each item, the most bytes the items hold at
// once during its life.
func planPressure(items []planItem) []int64 {
	type event struct{ t, d int64 }
	evs := make([]event, 0, 2*len(items))
	for _, it := range items {
		evs = append(evs, event{it.from, it.size}, event{min(it.to, planForever/2), -it.size})
	}
	slices.SortFunc(evs, func(a, b event) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		return cmp.Compare(a.d, b.d)
	})
	// The bytes live from each distinct time of an event to the next.
	var times, live []int64
	var cur int64
	for k, e := range evs {
		cur += e.d
		if k+1 == len(evs) || evs[k+1].t != e.t {
			times = append(times, e.t)
			live = append(live, cur)
		}
	}
	pressure := make([]int64, len(items))
	for i, it := range items {
		k, _ := slices.BinarySearch(times, it.from)
		for ; k < len(times) && times[k] < it.to; k++ {
			pressure[i] = max(pressure[i], live[k])
		}
	}
	return pressure
}

// planLayout is the state of layoutPlan: the spans placed, by address,
// and those touching each page at its first or last byte.
type planLayout struct {
	page  int64
	spans []planSpan   // by lo
	edges [][]planSpan // edges[p]: the spans whose first or last page is p
	// memo[p] is shared(p) for the item being placed when seen[p] is its
	// number (n), counted from 1.
	memo []int64
	seen []int
	n    int
	// compact places each item where it touches the fewest pages that
	// no span placed touched (layoutWith's compact mode).
	compact bool
	touched []bool  // pages touched by a span placed (compact)
	fen     []int64 // Fenwick tree of touched, by page (compact)
}

// touch marks pages [first, last] touched (compact).
func (l *planLayout) touch(first, last int64) {
	for int64(len(l.touched)) <= last {
		n := max(2*len(l.touched), int(last)+1, 64)
		t := make([]bool, n)
		copy(t, l.touched)
		l.touched = t
		l.fen = make([]int64, n+1)
		for i, v := range t {
			if v {
				l.fenAdd(int64(i))
			}
		}
	}
	for pg := first; pg <= last; pg++ {
		if !l.touched[pg] {
			l.touched[pg] = true
			l.fenAdd(pg)
		}
	}
}

// fenAdd counts page pg touched in the Fenwick tree.
func (l *planLayout) fenAdd(pg int64) {
	for i := pg + 1; i < int64(len(l.fen)); i += i & -i {
		l.fen[i]++
	}
}

// untouched counts the pages of [first, last] no span touched yet.
func (l *planLayout) untouched(first, last int64) int64 {
	sum := func(n int64) int64 { // touched pages below n
		n = min(n, int64(len(l.touched)))
		var s int64
		for i := n; i > 0; i -= i & -i {
			s += l.fen[i]
		}
		return s
	}
	return last - first + 1 - (sum(last+1) - sum(first))
}

// add places a span.
func (l *planLayout) add(s planSpan) {
	i, _ := slices.BinarySearchFunc(l.spans, s.lo, func(a planSpan, lo int64) int { return cmp.Compare(a.lo, lo) })
	l.spans = slices.Insert(l.spans, i, s)
	first, last := s.lo/l.page, (s.hi-1)/l.page
	if l.compact {
		l.touch(first, last)
	}
	if int(last) >= len(l.edges) {
		l.edges = append(l.edges, make([][]planSpan, int(last)+1-len(l.edges))...)
	}
	l.edges[first] = append(l.edges[first], s)
	if last != first {
		l.edges[last] = append(l.edges[last], s)
	}
}

// place finds the offset for it (see layoutPlan), below limit, places it
// there and returns it; -1 when it fits nowhere.
func (l *planLayout) place(it planItem, limit int64) int64 {
	g := l.page
	life := min(it.to, planForever/2) - it.from
	l.n++
	if len(l.memo) < len(l.edges) {
		l.memo = make([]int64, len(l.edges)*2)
		l.seen = make([]int, len(l.edges)*2)
	}
	// shared is how long page pg is used by others during it's life.
	shared := func(pg int64) int64 {
		if pg >= int64(len(l.edges)) {
			return 0
		}
		if l.seen[pg] == l.n {
			return l.memo[pg]
		}
		var most int64
		for _, s := range l.edges[pg] {
			if s.from < it.to && it.from < s.to {
				most = max(most, min(s.to, it.to, planForever/2)-max(s.from, it.from))
			}
		}
		l.seen[pg], l.memo[pg] = l.n, most
		return most
	}
	at, best, bestExt := int64(-1), int64(0), int64(0)
	try := func(x, g0, g1 int64) {
		if x < g0 || x+it.size > g1 {
			return
		}
		lo, hi := x/g, (x+it.size-1)/g
		var ext int64 // pages added to the footprint (compact)
		if l.compact {
			ext = l.untouched(lo, hi)
		}
		c := (hi-lo+1)*life - shared(lo)
		if hi != lo {
			c -= shared(hi)
		}
		if at < 0 || ext < bestExt || ext == bestExt && (c < best || c == best && x < at) {
			at, best, bestExt = x, c, ext
		}
	}
	gap := func(g0, g1 int64) {
		if g1-g0 < it.size {
			return
		}
		try(g0, g0, g1)
		try((g0+g-1)/g*g, g0, g1)
		if g1 < limit {
			try(g1-it.size, g0, g1)
			try(g1/g*g-it.size, g0, g1)
		}
	}
	var cur int64
	for _, s := range l.spans {
		if s.from >= it.to || it.from >= s.to {
			continue
		}
		if s.lo > cur {
			gap(cur, s.lo)
		}
		cur = max(cur, s.hi)
	}
	gap(cur, limit)
	if at >= 0 {
		l.add(planSpan{at, at + it.size, it.from, it.to})
	}
	return at
}

// planPeak returns the most pages that the items placed at offs (an
// item at -1 counted as pages of its own) and the obstacles touch at
// once: what a pool running the plan would hold at its peak.
func planPeak(items []planItem, offs []int64, fixed []planFixed, page int64) int64 {
	type event struct {
		t, lo, hi int64 // pages [lo, hi], or hi-lo+1 pages of its own when lo < 0
		d         int32
	}
	evs := make([]event, 0, 2*(len(items)+len(fixed)))
	top := int64(0)
	add := func(from, to, off, size int64) {
		lo, hi := off/page, (off+size-1)/page
		if off < 0 {
			lo, hi = -1, (size+page-1)/page-1
		}
		top = max(top, hi+1)
		evs = append(evs, event{from, lo, hi, 1})
		if to < planForever {
			evs = append(evs, event{to, lo, hi, -1})
		}
	}
	for _, f := range fixed {
		add(-1, f.to, f.off, f.size)
	}
	for i, it := range items {
		add(it.from, it.to, offs[i], it.size)
	}
	slices.SortFunc(evs, func(a, b event) int {
		if a.t != b.t {
			return cmp.Compare(a.t, b.t)
		}
		return cmp.Compare(a.d, b.d) // frees first
	})
	edges := make([]int32, top)
	var cur, peak int64
	for _, e := range evs {
		if e.lo < 0 {
			cur += int64(e.d) * (e.hi - e.lo)
		} else {
			cur += int64(e.d) * max(0, e.hi-e.lo-1)
			for pg := e.lo; ; pg = e.hi {
				if c := edges[pg] + e.d; c == 0 {
					cur--
				} else if c == 1 && e.d > 0 {
					cur++
				}
				edges[pg] += e.d
				if pg == e.hi {
					break
				}
			}
		}
		peak = max(peak, cur)
	}
	return peak
}

// planFoot returns the pages that the items placed at offs (an item at
// -1 counted as pages of its own) and the obstacles touch at any time:
// what a pool running the plan every period without moving a page holds.
func planFoot(items []planItem, offs []int64, fixed []planFixed, page int64) int64 {
	var pages []bool
	var n int64
	add := func(off, size int64) {
		if off < 0 {
			n += (size + page - 1) / page
			return
		}
		lo, hi := off/page, (off+size-1)/page
		if int64(len(pages)) <= hi {
			pages = append(pages, make([]bool, hi+1-int64(len(pages)))...)
		}
		for pg := lo; pg <= hi; pg++ {
			if !pages[pg] {
				pages[pg] = true
				n++
			}
		}
	}
	for _, f := range fixed {
		add(f.off, f.size)
	}
	for i, it := range items {
		add(offs[i], it.size)
	}
	return n
}
