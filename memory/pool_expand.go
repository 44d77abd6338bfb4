package memory

import (
	"errors"
	"fmt"
	"slices"
)

// Expandable segments (PoolConfig.Expandable, over a VirtualMemory
// backend), in the manner of PyTorch's expandable_segments:True and
// GMLake's stitching.
//
// Each stream's small and large pools have one expandable segment: a
// range of reserved address space, far larger than the device's memory,
// of which only some pages have physical memory mapped. Its blocks tile
// the whole range; those with no memory behind them are holes
// (blockHole), page-aligned and never in the free index, so the fast path
// (best fit among free blocks, split, coalesce) is the classic pool's,
// untouched. When no free block fits, growExpandable places the request
// in the run of free blocks and holes that needs the fewest new pages
// (the end of the used range is one such run, extending to the end of the
// reservation), and maps pages there. The pages come first from other
// free blocks, anywhere in the pool: whole pages inside them are unmapped
// and mapped again where they are needed (steal), which stitches
// scattered free memory into one contiguous block as GMLake does; only
// when no free block has a whole page to give are new pages created. So
// the physical memory a pool holds grows only when live data fills every
// whole page it has: reserved exceeds allocated by at most the partial
// pages at the edges of free runs. Stealing synchronises the device
// first (Sync), as the pages may still be read by queued work; steady
// training steps allocate from cached blocks and never get there.
//
// EmptyCache unmaps and releases every whole page inside free blocks (and
// the address space of segments left empty); Close releases everything.

// expansion is the state of an expandable segment: the page mapped at
// each page index of its range (0 where there is none), up to the last
// page ever mapped.
type expansion struct {
	pages []Page
	stale []bool // pages lent elsewhere, still mapped here too
}

// staleBytes is the pool's address space still mapped to pages lent
// elsewhere; sweepStale unmaps it.

// expandables calls f on the expandable segments of stream s and the
// given pool kind until it returns false.
func (p *Pool) expandables(s Stream, small bool, f func(seg *segment) bool) {
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x != nil && seg.stream == s && seg.small == small && !f(seg) {
			return
		}
	}
}

// growExpandable serves a request of rounded bytes on stream s that no
// free block fits: it maps memory into the best run of free blocks and
// holes of one of the stream's expandable segments (a new segment when
// none has room) and returns the free block that starts where the request
// goes, not in the free index.
func (p *Pool) growExpandable(size, rounded int64, s Stream) (*Block, error) {
	b, err := p.expand(rounded, s)
	if err != nil && isOOM(err) && len(p.pending) > 0 {
		// Blocks waiting for other streams' work may give pages or fit.
		if werr := p.processEvents(true); werr != nil {
			return nil, werr
		}
		if b := p.takeFree(rounded, s); b != nil {
			return b, nil
		}
		b, err = p.expand(rounded, s)
	}
	if err != nil {
		if !isOOM(err) {
			return nil, fmt.Errorf("memory: pool %s: mapping memory for %s: %w", p.name, FormatBytes(size), err)
		}
		p.sinks.oom()
		return nil, p.oomError(size, err)
	}
	return b, nil
}

// expand is growExpandable's work, once.
func (p *Pool) expand(rounded int64, s Stream) (*Block, error) {
	small := isSmall(rounded) && !p.unified
	var best *segment
	var bestPos, bestCost, bestLen int64 = 0, -1, 0
	p.expandables(s, small, func(seg *segment) bool {
		if pos, cost, n := p.bestRun(seg, rounded); cost >= 0 && (bestCost < 0 || cost < bestCost || cost == bestCost && n < bestLen) {
			best, bestPos, bestCost, bestLen = seg, pos, cost, n
		}
		return true
	})
	if best == nil {
		seg, err := p.newExpandable(s, small, rounded)
		if err != nil {
			return nil, err
		}
		best, bestPos, bestCost = seg, 0, p.pagesOver(0, rounded)
	}
	lo, hi := p.pageRange(bestPos, rounded)
	pages, err := p.gatherPages(int(bestCost), best, lo, hi)
	if err != nil {
		return nil, err
	}
	if err := p.mapRun(best, lo, hi, pages); err != nil {
		return nil, err
	}
	b := p.carve(best, bestPos)
	// Stale address space costs no memory, only mappings: it is swept
	// once it outgrows the memory mapped.
	if p.staleBytes > p.sinks.own.Reserved.Current {
		if err := p.sweepStale(); err != nil {
			p.insertFree(b)
			return nil, err
		}
	}
	return b, nil
}

// pageRange is the page-aligned range of offsets [lo, hi) holding bytes
// [pos, pos+n).
func (p *Pool) pageRange(pos, n int64) (lo, hi int64) {
	g := p.page
	return pos / g * g, (pos + n + g - 1) / g * g
}

// pagesOver counts the pages over bytes [pos, pos+n).
func (p *Pool) pagesOver(pos, n int64) int64 {
	lo, hi := p.pageRange(pos, n)
	return (hi - lo) / p.page
}

// bestRun finds in seg the place for n bytes that needs the fewest new
// pages: each run of free blocks and holes long enough is tried with the
// request at its start and at its end. It returns the offset and the
// number of pages to map, or a cost of -1 when no run is long enough.
func (p *Pool) bestRun(seg *segment, n int64) (pos, cost, runLen int64) {
	cost = -1
	base := seg.region.Addr
	var runStart *Block
	try := func(first, end *Block) { // the run [first, end)
		start := int64(first.addr - base)
		stop := seg.region.Size
		if end != nil {
			stop = int64(end.addr - base)
		}
		if stop-start < n {
			return
		}
		for _, at := range [2]int64{start, stop - n} {
			lo, hi := p.pageRange(at, n)
			var c int64
			for b := first; b != end; b = b.next {
				if b.state == blockHole {
					bl, bh := int64(b.addr-base), int64(b.addr-base)+b.size
					if l, h := max(lo, bl), min(hi, bh); h > l {
						c += (h - l) / p.page
					}
				}
			}
			if cost < 0 || c < cost || c == cost && stop-start < runLen {
				pos, cost, runLen = at, c, stop-start
			}
		}
	}
	for b := seg.first; b != nil; b = b.next {
		if b.state == blockFree || b.state == blockHole {
			if runStart == nil {
				runStart = b
			}
			continue
		}
		if runStart != nil {
			try(runStart, b)
			runStart = nil
		}
	}
	if runStart != nil {
		try(runStart, nil)
	}
	return pos, cost, runLen
}

// newExpandable reserves the address space of a new expandable segment
// for stream s, large enough for a request of n bytes, tiled by one hole.
func (p *Pool) newExpandable(s Stream, small bool, n int64) (*segment, error) {
	size := max(p.vm.AddressSpace(), (n+p.page-1)/p.page*p.page)
	r, err := p.vm.ReserveAddress(size)
	if err != nil {
		return nil, err
	}
	if r.Size != size || r.Addr == 0 || r.Addr%uintptr(p.page) != 0 {
		return nil, errors.Join(fmt.Errorf("memory: backend %s reserved bad address space for %d bytes (addr %#x, size %d): %w",
			p.name, size, r.Addr, r.Size, ErrInvalidArgument), p.vm.FreeAddress(r))
	}
	seg := &segment{pool: p, region: r, stream: s, small: small, x: &expansion{}}
	h := p.newBlock()
	h.seg, h.addr, h.size, h.state = seg, r.Addr, size, blockHole
	seg.first = h
	seg.next = p.segs
	if p.segs != nil {
		p.segs.prev = seg
	}
	p.segs = seg
	p.nsegs++
	if p.hist != nil {
		p.hist.segment(EventReserve, p.tier, seg, r.Addr, 0)
	}
	return seg, nil
}

// gatherPages returns n unmapped pages for the range [lo, hi) of seg:
// stolen from whole pages inside free blocks elsewhere, else created. On
// error it releases what it gathered.
func (p *Pool) gatherPages(n int, seg *segment, lo, hi int64) ([]Page, error) {
	if n == 0 {
		return nil, nil
	}
	pages, err := p.steal(n, seg, lo, hi)
	for err == nil && len(pages) < n {
		held := p.sinks.own.Reserved.Current + int64(len(pages))*p.page
		if l := p.cfg.Limit; l > 0 && held+p.page > l {
			err = errLimit
			break
		}
		var pg Page
		if pg, err = p.vm.CreatePage(); err == nil {
			pages = append(pages, pg)
			p.sinks.pagesCreated(1)
		}
	}
	if err != nil {
		// The pages gathered so far (some lent, still mapped where they
		// were) become free memory of the range instead of being lost.
		if merr := p.mapRun(seg, lo, hi, pages); merr != nil && !errors.Is(merr, errShort) {
			err = errors.Join(err, merr)
		}
		return nil, err
	}
	return pages, nil
}

// releasePages gives unmapped pages back to the backend.
func (p *Pool) releasePages(pages []Page) error {
	var errs []error
	for _, pg := range pages {
		if err := p.vm.ReleasePage(pg); err != nil {
			errs = append(errs, err)
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
// start.
func (p *Pool) steal(n int, target *segment, lo, hi int64) ([]Page, error) {
	var pages []Page
	synced := false
	var order []*segment
	for _, same := range [2]bool{true, false} {
		for seg := p.segs; seg != nil; seg = seg.next {
			if seg.x != nil && (seg.stream == target.stream) == same {
				order = append(order, seg)
			}
		}
	}
	for _, seg := range order {
		if len(pages) >= n {
			break
		}
		lend := seg.stream == target.stream
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
				b = prev // part of the run being filled
				continue
			}
			if k := int64(n - len(pages)); (whi-wlo)/p.page > k {
				wlo = whi - k*p.page
			}
			if whi > wlo {
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
				}
				got, err := p.unmapFree(seg, b, wlo, whi)
				pages = append(pages, got...)
				if err != nil {
					return pages, err
				}
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
	before := seg.inactive()
	seg.mapped -= hi - lo
	p.sinks.inactiveSplit(seg.inactive() - before)
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
	before := seg.inactive()
	seg.mapped -= hi - lo
	p.staleBytes += hi - lo
	p.sinks.inactiveSplit(seg.inactive() - before)
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

// sweepStale unmaps every stale range, after a Sync.
func (p *Pool) sweepStale() error {
	if p.staleBytes == 0 {
		return nil
	}
	if err := p.vm.Sync(); err != nil {
		return err
	}
	return p.sweepStaleSynced()
}

// sweepStaleSynced is sweepStale once Sync has been called. The pages stay
// mapped where they were lent.
func (p *Pool) sweepStaleSynced() error {
	if p.staleBytes == 0 {
		return nil
	}
	var errs []error
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
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

// blockAt returns the block of seg holding address a.
func blockAt(seg *segment, a uintptr) *Block {
	for b := seg.first; b != nil; b = b.next {
		if a < b.addr+uintptr(b.size) {
			return b
		}
	}
	return nil
}

// errShort: mapRun had fewer pages than holes to fill.
var errShort = errors.New("not enough pages")

// mapRun maps pages into the holes of seg inside [lo, hi) (offsets,
// page-aligned; the rest of the range is free), in address order, which
// become free blocks merged with their free neighbours. With too few
// pages it maps what it has and returns errShort; pages it could not map
// (the driver refused) are released.
func (p *Pool) mapRun(seg *segment, lo, hi int64, pages []Page) error {
	base := seg.region.Addr
	for at := lo; at < hi; {
		b := blockAt(seg, base+uintptr(at))
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
			return errors.Join(err, p.releasePages(pages))
		}
		first := int(l / p.page)
		if need := first + k; need > len(seg.x.pages) {
			seg.x.pages = slices.Grow(seg.x.pages, need-len(seg.x.pages))[:need]
		}
		copy(seg.x.pages[first:], pages[:k])
		pages = pages[k:]
		before := seg.inactive()
		seg.mapped += h - l
		p.sinks.inactiveSplit(seg.inactive() - before)
		p.sinks.pagesMapped(h - l)
		if p.hist != nil {
			p.hist.segment(EventReserve, p.tier, seg, base+uintptr(l), h-l)
		}
		_, mid, _ := p.cut(b, base+uintptr(l), base+uintptr(h), blockFree)
		p.insertFree(mid) // merges with free neighbours, into the index
		at = h
		if len(pages) == 0 && h < min(hi, bEnd) {
			return errShort
		}
	}
	if len(pages) > 0 {
		return errors.Join(fmt.Errorf("memory: pool %s: %d pages gathered but not mapped", p.name, len(pages)), p.releasePages(pages))
	}
	return nil
}

// carve takes the free block that holds offset pos of seg out of the free
// index and returns it cut to start at pos (its part before pos stays
// free, in the index).
func (p *Pool) carve(seg *segment, pos int64) *Block {
	b := blockAt(seg, seg.region.Addr+uintptr(pos))
	tree := p.treeOf(seg)
	tree.delete(seg.stream, b)
	left, mid, _ := p.cut(b, seg.region.Addr+uintptr(pos), b.addr+uintptr(b.size), blockFree)
	if left != nil {
		tree.insert(seg.stream, left)
	}
	return mid
}

// releaseExpandable unmaps and releases every whole page inside the free
// blocks of the expandable segments, and gives back the address space of
// those left with no memory at all. It returns the bytes released.
func (p *Pool) releaseExpandable() (int64, error) {
	var released int64
	var errs []error
	synced := false
	if p.staleBytes > 0 {
		if err := p.vm.Sync(); err != nil {
			return 0, err
		}
		synced = true
		if err := p.sweepStaleSynced(); err != nil {
			return 0, err
		}
	}
	for seg := p.segs; seg != nil; {
		next := seg.next
		if seg.x == nil {
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
						errs = append(errs, err)
					} else {
						released += hi - lo
						errs = append(errs, p.releasePages(pages))
					}
					nb = blockAt(seg, seg.region.Addr+uintptr(hi)) // b's blocks were recut
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
	if seg.prev != nil {
		seg.prev.next = seg.next
	} else {
		p.segs = seg.next
	}
	if seg.next != nil {
		seg.next.prev = seg.prev
	}
	seg.prev, seg.next, seg.first = nil, nil, nil
	p.nsegs--
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
	for i := 0; i < len(seg.x.pages); {
		if seg.x.pages[i] == 0 {
			i++
			continue
		}
		j := i
		for j < len(seg.x.pages) && seg.x.pages[j] != 0 {
			j++
		}
		pages := seg.x.pages[i:j]
		if err := p.vm.Unmap(base+uintptr(int64(i)*p.page), pages); err != nil {
			errs = append(errs, err)
		}
		for k, pg := range pages { // a stale page is mapped elsewhere: released there
			if i+k < len(seg.x.stale) && seg.x.stale[i+k] {
				p.staleBytes -= p.page
				continue
			}
			errs = append(errs, p.releasePages([]Page{pg}))
			p.sinks.pagesUnmapped(p.page)
		}
		i = j
	}
	seg.x.pages, seg.x.stale, seg.mapped = nil, nil, 0
	for b := seg.first; b != nil; b = b.next {
		b.state = blockHole // nothing to take out of an index: Close clears them
	}
	errs = append(errs, p.freeExpandable(seg))
	return errors.Join(errs...)
}
