package memory

import (
	"errors"
	"fmt"
	"os"
	"slices"
)

// EnvExpandableLend=0 makes steal unmap every page it takes, after a
// synchronisation, instead of lending the pages of the target stream's own
// free blocks without one (lendFree): a diagnostic that takes lending out of
// a run whose results are in doubt, at the cost of more synchronisations.
const EnvExpandableLend = "STRATA_EXPANDABLE_LEND"

// noLending is EnvExpandableLend=0, read once.
var noLending = os.Getenv(EnvExpandableLend) == "0"

// EnvExpandableSteal=0 makes growth create every page it maps instead of
// taking pages inside free blocks first (steal): a diagnostic that takes
// stealing and lending out of a run (session 20), at the cost of memory.
const EnvExpandableSteal = "STRATA_EXPANDABLE_STEAL"

// noStealing is EnvExpandableSteal=0, read once.
var noStealing = os.Getenv(EnvExpandableSteal) == "0"

// The pages of expandable segments (pool_expand.go): taking them from
// other free blocks (stealing, lending), sweeping stale ranges, cutting
// and merging blocks, mapping runs of pages.

// releasePages gives unmapped pages back to the backend; only those it
// took back are counted.
func (p *Pool) releasePages(pages []Page) error {
	var errs []error
	for _, pg := range pages {
		if err := p.vm.ReleasePage(pg); err != nil {
			errs = append(errs, err)
			continue
		}
		p.sinks.pagesReleased(1)
	}
	return errors.Join(errs...)
}

// steal takes up to n whole pages inside free blocks of the pool's
// expandable segments, outside [lo, hi) of target, and returns them. It
// takes from segments of target's stream first and lends their pages
// without unmapping them (lendFree): work queued on that stream before
// the block was freed runs before any work on the new block, as when a
// cached block is reused, so no synchronisation is needed. Pages of other
// streams' segments are unmapped, after one Sync. Within a segment it
// takes from the end first, which keeps live data packed towards the
// start. Segments of held streams (StreamHolder) give nothing to other
// streams, as they give nothing to EmptyCache: a captured graph's replays
// write their free blocks, which must stay mapped where they are. A held
// target (a graph's private pool growing during its capture, when the
// device must not be synchronised) takes from its own segments only, by
// lending; the addresses it lends from stay mapped while it is held
// (sweepStaleSynced). Pages that the running
// step plan still needs (pool_expand_plan.go) are taken last: a lent
// page stays mapped where it was, and mapping there again must wait for
// a synchronisation. With keep (a settled plan runs), it takes none of
// the pages the plan places any block on, earlier in its period included:
// the plan needs them again the next period (gatherPages then creates
// the pages missing).
func (p *Pool) steal(n int, target *segment, lo, hi int64, keep bool) ([]Page, error) {
	var pages []Page
	var err error
	passes := []int{stealAny}
	if sp := p.planner; sp != nil && sp.plan != nil {
		passes = []int{stealSpare, stealAny}
		if keep {
			passes = []int{stealUnplanned}
		}
	}
	for _, spare := range passes {
		if pages, err = p.stealFrom(pages, n, target, lo, hi, spare); err != nil || len(pages) >= n {
			break
		}
	}
	return pages, err
}

// The passes of steal: any page, those the running plan needs no more,
// those it places nothing on.
const (
	stealAny = iota
	stealSpare
	stealUnplanned
)

// stealFrom is one pass of steal, adding to pages; with spare
// stealSpare it takes none of the pages the running plan still needs,
// with stealUnplanned none that it places anything on.
func (p *Pool) stealFrom(pages []Page, n int, target *segment, lo, hi int64, spare int) ([]Page, error) {
	synced := false
	var order []*segment
	h := p.holder()
	// A held stream's range (a CUDA graph's private pool) grows while its
	// graph is captured, when the device must not be synchronised: it
	// takes pages from its own free blocks only, which lending moves
	// without a synchronisation.
	capturing := heldBy(h, target.stream)
	if capturing && noLending {
		return pages, nil
	}
	for _, same := range [2]bool{true, false} {
		if capturing && !same {
			break
		}
		for seg := p.segs; seg != nil; seg = seg.next {
			if seg.x != nil && (seg.stream == target.stream) == same && (same || !heldBy(h, seg.stream)) {
				order = append(order, seg)
			}
		}
	}
	for _, seg := range order {
		if len(pages) >= n {
			break
		}
		lend := seg.stream == target.stream && !noLending
		var last *Block
		for b := seg.first; b != nil; b = b.next {
			last = b
		}
		for b := last; b != nil && len(pages) < n; {
			prev := b.prev
			if b.state != blockFree {
				b = prev
				continue
			}
			off := int64(b.addr - seg.region.Addr)
			wlo, whi := (off+p.page-1)/p.page*p.page, (off+b.size)/p.page*p.page
			if seg == target && wlo < hi && whi > lo {
				// Only its pages outside the run being filled: those
				// after it first, then those before it.
				if whi > hi {
					wlo = hi
				} else {
					whi = min(whi, lo)
				}
			}
			if spare != stealAny {
				wlo, whi = p.planner.spare(seg, wlo, whi, p.page, spare == stealUnplanned)
			}
			if k := int64(n - len(pages)); (whi-wlo)/p.page > k {
				wlo = whi - k*p.page
			}
			if whi <= wlo {
				b = prev
				continue
			}
			if wlo > off {
				// What stays of b before the pages taken is looked at
				// again.
				prev = b
			}
			if lend {
				pages = append(pages, p.lendFree(seg, b, wlo, whi)...)
				b = prev
				continue
			}
			if !synced {
				if err := p.vm.Sync(); err != nil {
					return pages, err
				}
				synced = true
				if err := p.sweepStaleSynced(); err != nil {
					return pages, err
				}
				// The sweep merges stale blocks into holes and recycles
				// their structs: b's left neighbour may be gone.
				if wlo <= off {
					prev = b.prev
				}
			}
			got, err := p.unmapFree(seg, b, wlo, whi)
			pages = append(pages, got...)
			if err != nil {
				return pages, err
			}
			b = prev
		}
	}
	return pages, nil
}

// unmapFree unmaps the pages [lo, hi) (offsets, page-aligned) inside the
// free block b of seg, which becomes a hole there, and returns them.
func (p *Pool) unmapFree(seg *segment, b *Block, lo, hi int64) ([]Page, error) {
	base := seg.region.Addr
	first, last := lo/p.page, hi/p.page
	pages := slices.Clone(seg.x.pages[first:last])
	if err := p.vm.Unmap(base+uintptr(lo), pages); err != nil {
		return nil, err
	}
	clear(seg.x.pages[first:last])
	tree := p.treeOf(seg)
	tree.delete(seg.stream, b)
	before := seg.spanned()
	seg.mapped -= hi - lo
	p.sinks.spannedBy(seg.spanned() - before)
	p.sinks.pagesUnmapped(hi - lo)
	if p.hist != nil {
		p.hist.segment(EventRelease, p.tier, seg, base+uintptr(lo), hi-lo)
	}
	left, hole, right := p.cut(b, base+uintptr(lo), base+uintptr(hi), blockHole)
	for _, r := range [2]*Block{left, right} {
		if r != nil { // b's remnants: free, next to the hole and to non-free blocks
			tree.insert(seg.stream, r)
		}
	}
	p.mergeState(hole, blockHole)
	return pages, nil
}

// lendFree takes the pages [lo, hi) (offsets, page-aligned) inside the
// free block b of seg out of use there, without unmapping them, and
// returns them to be mapped elsewhere: a physical page may be mapped at
// several addresses. The range becomes a stale block, which nothing
// allocates from; sweepStale unmaps it later, when a synchronisation is
// due anyway or the stale bytes outgrow the mapped ones.
func (p *Pool) lendFree(seg *segment, b *Block, lo, hi int64) []Page {
	base := seg.region.Addr
	first, last := int(lo/p.page), int(hi/p.page)
	pages := slices.Clone(seg.x.pages[first:last])
	if len(seg.x.stale) < len(seg.x.pages) {
		seg.x.stale = slices.Grow(seg.x.stale, len(seg.x.pages)-len(seg.x.stale))[:len(seg.x.pages)]
	}
	for i := first; i < last; i++ {
		seg.x.stale[i] = true
	}
	tree := p.treeOf(seg)
	tree.delete(seg.stream, b)
	before := seg.spanned()
	seg.mapped -= hi - lo
	p.staleBytes += hi - lo
	seg.x.staleBytes += hi - lo
	p.sinks.spannedBy(seg.spanned() - before)
	p.sinks.pagesUnmapped(hi - lo) // counted again where they are mapped
	if p.hist != nil {
		p.hist.segment(EventRelease, p.tier, seg, base+uintptr(lo), hi-lo)
	}
	left, stale, right := p.cut(b, base+uintptr(lo), base+uintptr(hi), blockStale)
	for _, r := range [2]*Block{left, right} {
		if r != nil {
			tree.insert(seg.stream, r)
		}
	}
	p.mergeState(stale, blockStale)
	return pages
}

// sweepStale unmaps every stale range but held streams' (sweepable),
// after a Sync.
func (p *Pool) sweepStale() error {
	if p.sweepable() == 0 {
		return nil
	}
	if err := p.vm.Sync(); err != nil {
		return err
	}
	return p.sweepStaleSynced()
}

// sweepStaleSynced is sweepStale once Sync has been called. The pages stay
// mapped where they were lent. A held stream's stale ranges stay mapped
// too: they are the addresses of blocks freed while its CUDA graph was
// captured, which the graph's replays still write (their pages, lent to
// later blocks of the same capture, are written there in the same order
// as during the capture); they are swept once the stream is held no
// more.
func (p *Pool) sweepStaleSynced() error { return p.sweepStaleBut(p.holder()) }

// sweepStaleBut is sweepStaleSynced leaving the stale ranges of the
// streams h holds (none with a nil h: Close, which releases them all).
func (p *Pool) sweepStaleBut(h StreamHolder) error {
	if p.staleBytes == 0 {
		return nil
	}
	var errs []error
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil || seg.x.staleBytes == 0 || heldBy(h, seg.stream) {
			continue
		}
		base := seg.region.Addr
		for b := seg.first; b != nil; {
			next := b.next
			if b.state == blockStale {
				off := int64(b.addr - base)
				first, last := int(off/p.page), int((off+b.size)/p.page)
				if err := p.vm.Unmap(b.addr, seg.x.pages[first:last]); err != nil {
					errs = append(errs, err)
					b = next
					continue
				}
				clear(seg.x.pages[first:last])
				clear(seg.x.stale[first:last])
				p.staleBytes -= b.size
				seg.x.staleBytes -= b.size
				b.state = blockHole
				next = p.mergeState(b, blockHole).next
			}
			b = next
		}
	}
	return errors.Join(errs...)
}

// cut carves [from, to) out of block b, which is in no free index, as a
// block of the given state, and returns the parts before it (nil when
// none), it, and after it (nil when none); they keep b's state.
func (p *Pool) cut(b *Block, from, to uintptr, state blockState) (left, mid, right *Block) {
	split := func(b *Block, at uintptr) *Block {
		r := p.newBlock()
		r.seg, r.addr, r.size, r.state = b.seg, at, int64(b.addr)+b.size-int64(at), b.state
		r.prev, r.next = b, b.next
		if b.next != nil {
			b.next.prev = r
		}
		b.next = r
		b.size = int64(at - b.addr)
		return r
	}
	mid = b
	if from > b.addr {
		left, mid = b, split(b, from)
	}
	if to < mid.addr+uintptr(mid.size) {
		right = split(mid, to)
	}
	mid.state = state
	return left, mid, right
}

// mergeState merges the hole or stale block h with neighbours of the
// same state and returns the merged block.
func (p *Pool) mergeState(h *Block, state blockState) *Block {
	if prev := h.prev; prev != nil && prev.state == state {
		p.absorb(prev, h)
		h = prev
	}
	if next := h.next; next != nil && next.state == state {
		p.absorb(h, next)
	}
	return h
}

// blockAt returns the block of seg holding address a, found from the
// live block below a when the pool plans its steps and its planner is
// awake (it keeps them by address then), else from the segment's first
// block.
func (p *Pool) blockAt(seg *segment, a uintptr) *Block {
	if sp := p.planner; sp != nil && !sp.off() && !sp.dormant {
		return sp.blockAt(seg, a)
	}
	return blockAt(seg, a)
}

// blockAt returns the block of seg holding address a.
func blockAt(seg *segment, a uintptr) *Block {
	for b := seg.first; b != nil; b = b.next {
		if a < b.addr+uintptr(b.size) {
			return b
		}
	}
	return nil
}

// freeMapped counts [lo, hi) (offsets, page-aligned) of seg, inside its
// block b (a hole or stale address space), as mapped again and makes it a
// free block, merged with its free neighbours into the index.
func (p *Pool) freeMapped(seg *segment, b *Block, lo, hi int64) {
	base := seg.region.Addr
	before := seg.spanned()
	seg.mapped += hi - lo
	if d := seg.spanned() - before; d != 0 {
		// Not spannedBy: the allocation that maps them may take them, and
		// looks at InactiveSplit's peak once it has (Pool.spanDue).
		p.sinks.moveSpanned(d)
		p.spanDue = true
	}
	p.sinks.pagesMapped(hi - lo)
	if p.hist != nil {
		p.hist.segment(EventReserve, p.tier, seg, base+uintptr(lo), hi-lo)
	}
	_, mid, _ := p.cut(b, base+uintptr(lo), base+uintptr(hi), blockFree)
	p.insertFree(mid)
}

// errShort: mapRun had fewer pages than holes to fill.
var errShort = errors.New("not enough pages")

// mapRun maps pages into the holes of seg inside [lo, hi) (offsets,
// page-aligned; the rest of the range is free), in address order, which
// become free blocks merged with their free neighbours. With too few
// pages it maps what it has and returns errShort; pages it could not map
// (the driver refused) are released, or free memory again where they were
// lent from (unlend).
func (p *Pool) mapRun(seg *segment, lo, hi int64, pages []Page) error {
	base := seg.region.Addr
	for at := lo; at < hi; {
		b := p.blockAt(seg, base+uintptr(at))
		bEnd := int64(b.addr-base) + b.size
		if b.state != blockHole {
			at = bEnd
			continue
		}
		l, h := at, min(hi, bEnd)
		k := int((h - l) / p.page)
		if k > len(pages) {
			if len(pages) == 0 {
				return errShort
			}
			k, h = len(pages), l+int64(len(pages))*p.page
		}
		if err := p.vm.Map(base+uintptr(l), pages[:k]); err != nil {
			return errors.Join(err, p.releasePages(p.unlend(pages)))
		}
		first := int(l / p.page)
		if need := first + k; need > len(seg.x.pages) {
			seg.x.pages = slices.Grow(seg.x.pages, need-len(seg.x.pages))[:need]
		}
		copy(seg.x.pages[first:], pages[:k])
		if sp := p.planner; sp != nil && sp.plan != nil && sp.plan.seg == seg {
			sp.plan.maps += int64(k)
		}
		pages = pages[k:]
		p.freeMapped(seg, b, l, h)
		at = h
		if len(pages) == 0 && h < min(hi, bEnd) {
			return errShort
		}
	}
	if len(pages) > 0 {
		return errors.Join(fmt.Errorf("memory: pool %s: %d pages gathered but not mapped", p.name, len(pages)), p.releasePages(p.unlend(pages)))
	}
	return nil
}

// carve takes the free block that holds offset pos of seg out of the free
// index and returns it cut to start at pos (its part before pos stays
// free, in the index).
func (p *Pool) carve(seg *segment, pos int64) *Block {
	return p.carveFrom(seg, p.blockAt(seg, seg.region.Addr+uintptr(pos)), pos)
}

// carveFrom is carve with b, the free block holding offset pos, found.
func (p *Pool) carveFrom(seg *segment, b *Block, pos int64) *Block {
	tree := p.treeOf(seg)
	tree.delete(seg.stream, b)
	left, mid, _ := p.cut(b, seg.region.Addr+uintptr(pos), b.addr+uintptr(b.size), blockFree)
	if left != nil {
		tree.insert(seg.stream, left)
	}
	return mid
}

// sweepable is the stale bytes sweepStale would unmap: all but held
// streams' (sweepStaleSynced).
func (p *Pool) sweepable() int64 {
	n := p.staleBytes
	if n == 0 {
		return 0
	}
	if h := p.holder(); h != nil {
		for seg := p.segs; seg != nil; seg = seg.next {
			if seg.x != nil && seg.x.staleBytes != 0 && h.Held(seg.stream) {
				n -= seg.x.staleBytes
			}
		}
	}
	return n
}
