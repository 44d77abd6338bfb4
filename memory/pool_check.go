package memory

import "fmt"

// EnvMemoryCheck=1 makes every expandable pool check, after each
// allocation, what its bookkeeping says of the memory behind its blocks:
// blocks of a segment tile its range, every block in use lies on mapped
// pages that are not stale, and no page is mapped at two places that both
// hold bytes in use (on a GPU both places are one memory, so each block
// would overwrite the other). A violation panics with the blocks and pages
// involved: it is a bug in the pool, which the host backend's tests may
// not reach. A diagnostic (slow: every page of the pool, an allocation).
const EnvMemoryCheck = "STRATA_MEMORY_CHECK"

var memoryCheck = envOn(EnvMemoryCheck) // 1, true, yes, on; read once

// pagePlace is a page index of an expandable segment.
type pagePlace struct {
	seg *segment
	i   int64
	b   *Block // a block in use on it, or nil
}

// checkExpandable returns the first violation of EnvMemoryCheck's rules
// in p, or nil.
func (p *Pool) checkExpandable() error {
	places := map[Page][]pagePlace{}
	var stale int64
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			continue
		}
		var segStale int64
		for _, s := range seg.x.stale {
			if s {
				segStale += p.page
			}
		}
		if segStale != seg.x.staleBytes {
			return fmt.Errorf("segment at %#x: %d stale bytes counted, %d on its stale pages", seg.region.Addr, seg.x.staleBytes, segStale)
		}
		stale += segStale
		at := seg.region.Addr
		used := map[int64]*Block{}
		for b := seg.first; b != nil; b = b.next {
			if b.addr != at {
				return fmt.Errorf("segment at %#x: block at %#x where the one before ends at %#x", seg.region.Addr, b.addr, at)
			}
			at += uintptr(b.size)
			if b.state == blockFree || b.state == blockHole || b.state == blockStale {
				continue
			}
			off := int64(b.addr - seg.region.Addr)
			for i := off / p.page; i <= (off+b.size-1)/p.page; i++ {
				if i >= int64(len(seg.x.pages)) || seg.x.pages[i] == 0 {
					return fmt.Errorf("segment at %#x: %s block at %#x (%s, state %d) on unmapped page %d", seg.region.Addr, FormatBytes(b.size), b.addr, b.role, b.state, i)
				}
				if i < int64(len(seg.x.stale)) && seg.x.stale[i] {
					return fmt.Errorf("segment at %#x: %s block at %#x (%s, state %d) on stale page %d (mapped elsewhere too)", seg.region.Addr, FormatBytes(b.size), b.addr, b.role, b.state, i)
				}
				used[i] = b
			}
		}
		for i, pg := range seg.x.pages {
			if pg != 0 {
				places[pg] = append(places[pg], pagePlace{seg: seg, i: int64(i), b: used[int64(i)]})
			}
		}
	}
	if stale != p.staleBytes {
		return fmt.Errorf("%d stale bytes counted, %d on the segments' stale pages", p.staleBytes, stale)
	}
	for pg, ps := range places {
		var live []pagePlace
		for _, pl := range ps {
			if pl.b != nil {
				live = append(live, pl)
			}
		}
		if len(live) > 1 {
			a, b := live[0], live[1]
			return fmt.Errorf("page %#x is mapped at %#x and %#x, both in use: %s block at %#x (%s) and %s block at %#x (%s)",
				uintptr(pg), a.seg.region.Addr+uintptr(a.i*p.page), b.seg.region.Addr+uintptr(b.i*p.page),
				FormatBytes(a.b.size), a.b.addr, a.b.role, FormatBytes(b.b.size), b.b.addr, b.b.role)
		}
	}
	return nil
}
