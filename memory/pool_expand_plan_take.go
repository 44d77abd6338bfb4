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
}

// needs reports whether an item still to come is placed on page pg.
func (pl *stepPlan) needs(pg int64) bool {
	return pg < int64(len(pl.need)) && int(pl.need[pg]) >= pl.next
}

// spare returns the highest run of pages in [wlo, whi) (offsets of seg,
// page-aligned) that the running plan does not need any more: steal takes
// those first, since a page lent stays mapped where it was (stale) until
// a synchronisation, and the plan would find its place taken.
func (sp *stepPlanner) spare(seg *segment, wlo, whi, g int64) (int64, int64) {
	pl := sp.plan
	if pl == nil || pl.seg != seg {
		return wlo, whi
	}
	for whi > wlo && pl.needs(whi/g-1) {
		whi -= g
	}
	lo := whi
	for lo > wlo && !pl.needs(lo/g-1) {
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
				sp.plan = nil
				sp.deviations++
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
	seg := plan.seg
	base := seg.region.Addr
	stale := false
	for b := p.blockAt(seg, base+uintptr(off)); b != nil && int64(b.addr-base) < off+rounded; b = b.next {
		switch b.state {
		case blockFree, blockHole:
		case blockStale:
			stale = true
		default: // taken: the plan no longer holds
			sp.plan = nil
			sp.deviations++
			return nil
		}
	}
	if stale {
		if err := p.sweepStale(); err != nil {
			sp.plan = nil
			return nil
		}
	}
	lo, hi := p.pageRange(off, rounded)
	var holes int64
	for b := p.blockAt(seg, base+uintptr(lo)); b != nil && int64(b.addr-base) < hi; b = b.next {
		if b.state == blockHole {
			bl, bh := int64(b.addr-base), int64(b.addr-base)+b.size
			holes += (min(hi, bh) - max(lo, bl)) / p.page
		}
	}
	if holes > 0 {
		pages, err := p.gatherPages(int(holes), seg, lo, hi)
		if err == nil {
			err = p.mapRun(seg, lo, hi, pages)
		}
		if err != nil {
			sp.plan = nil
			return nil
		}
	}
	sp.planned++
	return p.carve(seg, off)
}
