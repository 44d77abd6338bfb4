package memory

import "slices"

// Undoing a loan (pool_expand_pages.go): pages gathered for growth that
// could not be mapped at their new place (the backend refused Map) are
// given back. A lent page is still mapped where it was lent from, as a
// stale range: releasing it there would leave that range mapped to a page
// no one owns (the host's emulation refuses to release a mapped page, and
// it leaks). unlend turns the page back into free memory at one of its
// stale places instead, as it was before the loan.

// unlend makes each of pages that is stale somewhere free memory at its
// first stale place again, and returns the others (mapped nowhere), for
// releasePages.
func (p *Pool) unlend(pages []Page) []Page {
	if p.staleBytes == 0 || len(pages) == 0 {
		return pages
	}
	rest := slices.Clone(pages)
	for seg := p.segs; seg != nil && len(rest) > 0; seg = seg.next {
		if seg.x == nil || seg.x.staleBytes == 0 {
			continue
		}
		for i, stale := range seg.x.stale {
			if !stale {
				continue
			}
			if k := slices.Index(rest, seg.x.pages[i]); k >= 0 {
				p.restoreStale(seg, int64(i))
				rest = slices.Delete(rest, k, k+1)
			}
		}
	}
	return rest
}

// restoreStale makes the stale page i of seg a mapped page of free memory
// again (lendFree undone for one page).
func (p *Pool) restoreStale(seg *segment, i int64) {
	lo := i * p.page
	seg.x.stale[i] = false
	seg.x.staleBytes -= p.page
	p.staleBytes -= p.page
	// The stale parts around it stay stale.
	p.freeMapped(seg, p.blockAt(seg, seg.region.Addr+uintptr(lo)), lo, lo+p.page)
}
