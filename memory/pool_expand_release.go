package memory

import (
	"errors"
	"fmt"
)

// Giving expandable segments' memory back (pool_expand.go): EmptyCache
// unmaps whole free pages, Close releases everything.

// releaseExpandable unmaps and releases every whole page inside the free
// blocks of the expandable segments of the streams take accepts (but
// those of held streams: StreamHolder), and gives back the address space
// of those left with no memory at all. It returns the bytes released.
func (p *Pool) releaseExpandable(take func(Stream) bool) (int64, error) {
	var released int64
	var errs []error
	synced := false
	if p.sweepable() > 0 {
		if err := p.vm.Sync(); err != nil {
			return 0, err
		}
		synced = true
		if err := p.sweepStaleSynced(); err != nil {
			return 0, err
		}
	}
	h := p.holder()
	for seg := p.segs; seg != nil; {
		next := seg.next
		if seg.x == nil || heldBy(h, seg.stream) || !take(seg.stream) {
			seg = next
			continue
		}
		for b := seg.first; b != nil; {
			nb := b.next
			if b.state == blockFree {
				off := int64(b.addr - seg.region.Addr)
				lo, hi := (off+p.page-1)/p.page*p.page, (off+b.size)/p.page*p.page
				if hi > lo {
					if !synced {
						if err := p.vm.Sync(); err != nil {
							return released, err
						}
						synced = true
					}
					pages, err := p.unmapFree(seg, b, lo, hi)
					if err != nil {
						errs = append(errs, err) // b is as it was: on to b.next
					} else {
						released += hi - lo
						errs = append(errs, p.releasePages(pages))
						nb = blockAt(seg, seg.region.Addr+uintptr(hi)) // b's blocks were recut
					}
				}
			}
			b = nb
		}
		if seg.live == 0 && seg.mapped == 0 {
			errs = append(errs, p.freeExpandable(seg))
		}
		seg = next
	}
	return released, errors.Join(errs...)
}

// freeExpandable unlinks an expandable segment with nothing mapped and
// gives its address space back.
func (p *Pool) freeExpandable(seg *segment) error {
	for b := seg.first; b != nil; {
		next := b.next
		if b.state == blockFree {
			p.treeOf(seg).delete(seg.stream, b)
		}
		p.recycle(b)
		b = next
	}
	return p.freeAddress(seg)
}

// freeAddress unlinks an expandable segment with nothing mapped, whose
// blocks are out of the free index, and gives its address space back.
func (p *Pool) freeAddress(seg *segment) error {
	p.unlink(seg)
	if sp := p.planner; sp != nil && sp.plan != nil && sp.plan.seg == seg {
		sp.ended() // it places its blocks in seg: the next repetition plans anew
	}
	if p.hist != nil {
		p.hist.segment(EventRelease, p.tier, seg, seg.region.Addr, 0)
	}
	if err := p.vm.FreeAddress(seg.region); err != nil {
		return fmt.Errorf("memory: pool %s: freeing the address space of an expandable segment at %#x: %w", p.name, seg.region.Addr, err)
	}
	return nil
}

// closeExpandable unmaps every page of an expandable segment, live blocks'
// included, releases them and frees its address space (Close).
func (p *Pool) closeExpandable(seg *segment) error {
	var errs []error
	if len(seg.x.pages) > 0 {
		errs = append(errs, p.vm.Sync())
	}
	base := seg.region.Addr
	// Every run is unmapped before any page is released: a stale range's
	// page is also mapped at the place it was lent to, which may lie in an
	// earlier run (a held stream's, whose stale ranges the sweep left).
	var runs [][2]int
	for i := 0; i < len(seg.x.pages); {
		if seg.x.pages[i] == 0 {
			i++
			continue
		}
		j := i
		for j < len(seg.x.pages) && seg.x.pages[j] != 0 {
			j++
		}
		if err := p.vm.Unmap(base+uintptr(int64(i)*p.page), seg.x.pages[i:j]); err != nil {
			errs = append(errs, err)
		}
		runs = append(runs, [2]int{i, j})
		i = j
	}
	for _, r := range runs {
		i, j := r[0], r[1]
		pages := seg.x.pages[i:j]
		// The history records each run of pages counted as reserved here,
		// as unmapFree does.
		run := i
		recordRun := func(end int) {
			if p.hist != nil && end > run {
				p.hist.segment(EventRelease, p.tier, seg, base+uintptr(int64(run)*p.page), int64(end-run)*p.page)
			}
		}
		for k, pg := range pages { // a stale page is mapped elsewhere: released there
			if i+k < len(seg.x.stale) && seg.x.stale[i+k] {
				p.staleBytes -= p.page
				seg.x.staleBytes -= p.page
				recordRun(i + k)
				run = i + k + 1
				continue
			}
			errs = append(errs, p.releasePages([]Page{pg}))
			p.sinks.pagesUnmapped(p.page)
		}
		recordRun(j)
	}
	seg.x.pages, seg.x.stale, seg.mapped = nil, nil, 0
	// Close cleared the blocks' states and clears the indexes; the structs
	// are not recycled, so that a leaked block stays the pool's, as in a
	// classic segment: its Free and RecordStream report the pool closed.
	errs = append(errs, p.freeAddress(seg))
	return errors.Join(errs...)
}
