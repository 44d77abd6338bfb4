package memory

import (
	"flag"
	"slices"
)

// A bound for sub-page stitching (not built): the virtual-memory API maps
// one physical page at several addresses, so pages whose live bytes lie at
// disjoint offsets within the page could share one physical page. With
// -expandable-sweep-stitch, TestExpandableScaleSweep also reports how
// many physical pages the replay's layout at each new peak would need if
// partial pages were so shared (first fit, largest first), as a ratio
// over the peak requested: what stitching could save without moving any
// block.
var anaStitch = flag.Bool("expandable-sweep-stitch", false, "TestExpandableScaleSweep also prints the sub-page stitching bound")

// pageSpan is a live byte range within a page, [lo, hi).
type pageSpan struct{ lo, hi int64 }

// stitchedPages returns the physical pages p's live blocks would need if
// pages with live bytes at disjoint offsets shared one.
func stitchedPages(p *Pool) int64 {
	g := p.page
	var full int64
	var partial [][]pageSpan
	for seg := p.segs; seg != nil; seg = seg.next {
		spans := map[int64][]pageSpan{}
		for b := seg.first; b != nil; b = b.next {
			if b.state != blockLive {
				continue
			}
			off := int64(b.addr - seg.region.Addr)
			for pg := off / g; pg*g < off+b.size; pg++ {
				lo, hi := max(off, pg*g)-pg*g, min(off+b.size, (pg+1)*g)-pg*g
				spans[pg] = append(spans[pg], pageSpan{lo, hi})
			}
		}
		for _, s := range spans {
			var live int64
			for _, sp := range s {
				live += sp.hi - sp.lo
			}
			if live == g {
				full++
			} else {
				partial = append(partial, s)
			}
		}
	}
	used := func(s []pageSpan) (n int64) {
		for _, sp := range s {
			n += sp.hi - sp.lo
		}
		return n
	}
	slices.SortFunc(partial, func(a, b []pageSpan) int { return int(used(b) - used(a)) })
	var bins [][]pageSpan
	for _, s := range partial {
		placed := false
		for i, bin := range bins {
			if disjointSpans(bin, s) {
				bins[i] = append(bin, s...)
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, slices.Clone(s))
		}
	}
	return full + int64(len(bins))
}

// disjointSpans reports whether no span of a overlaps one of b.
func disjointSpans(a, b []pageSpan) bool {
	for _, x := range a {
		for _, y := range b {
			if x.lo < y.hi && y.lo < x.hi {
				return false
			}
		}
	}
	return true
}
