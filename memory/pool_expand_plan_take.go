package memory

// Running a step plan (pool_expand_plan.go): placing the allocations it
// expects, and keeping the pages it still needs where they are.

// stepPlan is the placement of the allocations expected from clock
// start: the i-th, of sizes[i] bytes, goes at offs[i] in seg (-1:
// anywhere) when on stream, else anywhere. next is the item expected
// now; extra counts the allocations in a row the plan did not expect.
type stepPlan struct {
	seg         *segment
	stream      Stream
	start       int64
	sizes       []int64
	offs        []int64
	next, extra int
	// need[pg] is the last item placed on page pg of seg, -1 for none.
	need []int32
	// maps counts the pages mapped in seg while the plan runs.
	maps int64
}

// needs reports whether an item still to come (with ever, any item of
// the plan) is placed on page pg.
func (pl *stepPlan) needs(pg int64, ever bool) bool {
	if ever {
		return pg < int64(len(pl.need)) && pl.need[pg] >= 0
	}
	return pg < int64(len(pl.need)) && int(pl.need[pg]) >= pl.next
}

// spare returns the highest run of pages in [wlo, whi) (offsets of seg,
// page-aligned) that the running plan does not need any more: steal takes
// those first, since a page lent stays mapped where it was (stale) until
// a synchronisation, and the plan would find its place taken.
func (sp *stepPlanner) spare(seg *segment, wlo, whi, g int64, ever bool) (int64, int64) {
	pl := sp.plan
	if pl == nil || pl.seg != seg {
		return wlo, whi
	}
	for whi > wlo && pl.needs(whi/g-1, ever) {
		whi -= g
	}
	lo := whi
	for lo > wlo && !pl.needs(lo/g-1, ever) {
		lo -= g
	}
	return lo, whi
}

// takePlanned returns the free block (out of the index) starting where
// the running plan puts the allocation of rounded bytes on stream s that
// comes now, its pages mapped; nil when the plan has no place for it,
// ending the plan when it has deviated (see pool_expand_plan.go).
func (p *Pool) takePlanned(rounded int64, s Stream) *Block {
	sp := p.planner
	plan := sp.plan
	i := plan.next
	if i >= len(plan.sizes) {
		sp.plan = nil
		return nil
	}
	if plan.sizes[i] != rounded {
		j, end := i+1, min(i+planSlack, len(plan.sizes))
		for j < end && plan.sizes[j] != rounded {
			j++
		}
		if j == end {
			if plan.extra++; plan.extra > planSlack {
				sp.deviated()
			}
			return nil
		}
		i = j
	}
	plan.next, plan.extra = i+1, 0
	off := plan.offs[i]
	if off < 0 || s != plan.stream {
		return nil
	}
	b, taken := p.placeAt(plan.seg, off, rounded)
	if b == nil {
		if taken {
			sp.deviated()
		} else {
			sp.ended()
		}
		return nil
	}
	sp.planned++
	return b
}

// takeTop returns the free block (out of the index) right after the
// highest live block of stream s's segment, its pages mapped, for a
// request of rounded bytes while no plan runs; nil when there is none.
// Small requests of a stretch the pool has no plan for (the first step,
// a deviation) go there: consecutive ones, such as the optimizer state
// the first step creates, then share pages, where best fit would put each
// in a hole between short-lived blocks that die long before it and leave
// it pinning a page on its own. (Without plans, the same rule for every
// small request raised reserved/requested: the steps' own small blocks
// then spread along the range.)
func (p *Pool) takeTop(rounded int64, s Stream) *Block {
	var seg *segment
	p.expandables(s, false, func(x *segment) bool { seg = x; return false })
	if seg == nil {
		return nil
	}
	live := p.planner.byAddr
	i := len(live) - 1
	for i >= 0 && (live[i] == nil || live[i].seg != seg || live[i].state != blockLive) {
		i--
	}
	if i < 0 {
		return nil
	}
	off := int64(live[i].addr-seg.region.Addr) + live[i].size
	if off+rounded > seg.region.Size {
		return nil
	}
	b, _ := p.placeAt(seg, off, rounded)
	return b
}

// placeAt returns the free block (out of the index) starting at offset
// off of seg, its pages over [off, off+rounded) mapped (stale address
// space there is swept first); nil when some of the range is taken or
// past the segment's end (then taken is set) or pages could not be had.
// A block found that does not hold off (the live index wrong) counts as
// taken: the plan deviates rather than carve a block the range is not in.
func (p *Pool) placeAt(seg *segment, off, rounded int64) (b *Block, taken bool) {
	base := seg.region.Addr
	stale, holes := false, false
	at := p.blockAt(seg, base+uintptr(off))
	if at == nil || off+rounded > seg.region.Size || int64(at.addr-base) > off || int64(at.addr-base)+at.size <= off {
		return nil, true
	}
	for b := at; b != nil && int64(b.addr-base) < off+rounded; b = b.next {
		switch b.state {
		case blockFree:
		case blockHole:
			holes = true
		case blockStale:
			stale = true
		default:
			return nil, true
		}
	}
	if !stale && !holes {
		// Free blocks only: their pages are mapped (the pages around the
		// range too: they hold its first and last bytes), and nothing
		// moved since at was found.
		return p.carveFrom(seg, at, off), false
	}
	if stale {
		// A held stream (a graph's capture) keeps its stale ranges and
		// must not synchronise: the place is not had.
		if heldBy(p.holder(), seg.stream) {
			return nil, true
		}
		if err := p.sweepStale(); err != nil {
			return nil, false
		}
	}
	lo, hi := p.pageRange(off, rounded)
	var missing int64
	for b := p.blockAt(seg, base+uintptr(lo)); b != nil && int64(b.addr-base) < hi; b = b.next {
		if b.state == blockHole {
			bl, bh := int64(b.addr-base), int64(b.addr-base)+b.size
			missing += (min(hi, bh) - max(lo, bl)) / p.page
		}
	}
	if missing > 0 {
		pages, err := p.gatherPages(int(missing), seg, lo, hi)
		if err == nil {
			err = p.mapRun(seg, lo, hi, pages)
		}
		if err != nil {
			return nil, false
		}
	}
	return p.carve(seg, off), false
}
