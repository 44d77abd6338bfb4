package memory

import (
	"errors"
	"fmt"
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
// pages at the edges of free runs. Stealing another stream's pages
// synchronises the device first (Sync), as they may still be read by
// queued work (a stream's own are lent without one, and a held stream,
// a graph's capture, takes only its own); steady training steps allocate
// from cached blocks and never get there.
//
// EmptyCache unmaps and releases every whole page inside free blocks (and
// the address space of segments left empty); Close releases everything.

// expansion is the state of an expandable segment: the page mapped at
// each page index of its range (0 where there is none), up to the last
// page ever mapped.
type expansion struct {
	pages []Page
	stale []bool // pages lent elsewhere, still mapped here too
	// staleBytes is the bytes of stale pages (pool.staleBytes counts every
	// segment's): a held stream's are kept mapped (sweepStaleSynced).
	staleBytes int64
	tiny       []int32 // live tiny blocks starting in each page (pool_expand_tiny.go)
}

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
func (p *Pool) growExpandable(size, rounded int64, s Stream, role Role) (*Block, error) {
	// Past the machine (and not already past the Limit, which says so
	// itself: the budget at work, for the placement scheduler).
	if most, what := requestBound(p.backend); most > 0 && rounded > most && !(p.cfg.Limit > 0 && rounded > p.cfg.Limit) {
		p.sinks.oom()
		return nil, p.oomError(size, fmt.Errorf("memory: %s: allocating %s: more than the %s %s: %w",
			p.name, FormatBytes(rounded), FormatBytes(most), what, ErrOutOfMemory))
	}
	b, err := p.expand(rounded, s, role)
	var werr error // a failed wait goes on as grow's does
	if err != nil && isOOM(err) && len(p.pending) > 0 {
		// Blocks waiting for other streams' work may fit (reuseWaiting),
		// or give pages once all of them are back.
		var got *Block
		if got, werr = p.reuseWaiting(rounded, s); got != nil {
			return got, nil
		}
		b, err = p.expand(rounded, s, role)
	}
	if err != nil && isOOM(err) {
		// The pools that share the Limit (a device pool's managed tier)
		// may cache what makes room.
		shared, relErr := p.releaseSharedCache(false)
		if relErr != nil {
			return nil, errors.Join(relErr, werr)
		}
		if shared > 0 {
			b, err = p.expand(rounded, s, role)
		}
	}
	if retry, relErr := p.peersFreed(err); relErr != nil {
		return nil, errors.Join(relErr, werr)
	} else if retry {
		b, err = p.expand(rounded, s, role)
	}
	if err != nil {
		if !isOOM(err) {
			return nil, errors.Join(fmt.Errorf("memory: pool %s: mapping memory for %s: %w", p.name, FormatBytes(size), err), werr)
		}
		p.sinks.oom()
		return nil, p.oomAfterWait(size, err, werr)
	}
	return b, nil
}

// requestBound is the most bytes one allocation may take from backend b,
// and what that is, when b says (the host's virtual memory: the memory
// this process may use); else 0. A request past it is refused before any
// address space is reserved or page created, as the classic pool's
// backend refuses a segment far beyond the machine.
func requestBound(b Backend) (int64, string) {
	if w, ok := b.(interface{ largestRequest() (int64, string) }); ok {
		return w.largestRequest()
	}
	return 0, ""
}

// expand is growExpandable's work, once.
func (p *Pool) expand(rounded int64, s Stream, role Role) (*Block, error) {
	whole := rounded%p.page == 0 && rounded >= 16*p.page && !shortLived(role) && p.planner != nil && p.planner.plans == 0
	small := isSmall(rounded) && !p.unified
	var best *segment
	var bestPos, bestCost, bestLen int64 = 0, -1, 0
	p.expandables(s, small, func(seg *segment) bool {
		if pos, cost, n := p.bestRun(seg, rounded, whole); cost >= 0 && (bestCost < 0 || cost < bestCost || cost == bestCost && n < bestLen) {
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
	// The free run past the request is free memory of the range: split it
	// off here, since alloc never splits for a request of MaxSplitSize or
	// more (it would be a cached block), and this one is a placement, not
	// a cached block.
	if p.cfg.MaxSplitSize > 0 && rounded >= p.cfg.MaxSplitSize && b.size-rounded >= p.largeRest {
		p.split(b, rounded)
	}
	// Stale address space costs no memory, only mappings: it is swept
	// once it outgrows the memory mapped (with a synchronisation: not
	// while a held stream, a graph's private pool, grows in its capture).
	if !heldBy(p.holder(), best.stream) && p.sweepable() > p.sinks.own.Reserved.Current {
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
// request at its start and at its end, and, for a request of whole pages
// (whole), the last run also at its first page boundary, taken over the
// run's start when it needs no more new pages (see shortLived). It
// returns the offset and the number of pages to map, or a cost of -1 when
// no run is long enough.
func (p *Pool) bestRun(seg *segment, n int64, whole bool) (pos, cost, runLen int64) {
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
		at3 := [3]int64{start, stop - n, -1}
		if a := (start + p.page - 1) / p.page * p.page; whole && end == nil && a != start && a+n <= stop {
			at3[2] = a
		}
		for k, at := range at3 {
			if at < 0 {
				continue
			}
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
			// The boundary displaces only its own run's start (pos):
			// not an earlier run of the same length and cost.
			if cost < 0 || c < cost || c == cost && (stop-start < runLen || k == 2 && pos == start) {
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
	seg := p.newSegment(r, s, small)
	seg.x = &expansion{}
	h := p.newBlock()
	h.seg, h.addr, h.size, h.state = seg, r.Addr, size, blockHole
	seg.first = h
	p.link(seg)
	if p.hist != nil {
		p.hist.segment(EventReserve, p.tier, seg, r.Addr, 0)
	}
	return seg, nil
}

// gatherPages returns n unmapped pages for the range [lo, hi) of seg:
// created within the slack a churning workload earned
// (pool_expand_churn.go), then stolen from whole pages inside free blocks
// elsewhere (while a settled step plan runs, none it places blocks on,
// unless no page can be created), else created. A request that cannot
// have them all keeps nothing: one that the limit or the host budget has
// no room for, even with every free page taken, is refused before any
// page moves (checkRoom); when the pages run out on the way, those it created go
// back to the backend, those lent by the stream's own free blocks are
// free memory where they were again (unlend), and those stolen from other
// streams' (unmapped there) become free memory of the range, so the bytes
// reserved are what they were.
func (p *Pool) gatherPages(n int, seg *segment, lo, hi int64) ([]Page, error) {
	if n == 0 {
		return nil, nil
	}
	if err := p.checkRoom(n); err != nil {
		return nil, err
	}
	// A held stream (a graph's private pool, growing in its capture) takes
	// no slack: pages created for it stay its own until it is released.
	var room, stolen, created []Page
	var err error
	if !heldBy(p.holder(), seg.stream) {
		room, err = p.createRoom(p.churnRoom(n))
	}
	// A settled step plan keeps the pages it places blocks on: it runs
	// in them every period (pool_expand_plan.go). Pages are created
	// rather than taken from it, unless there is no memory for them.
	keep := p.planner != nil && p.planner.plan != nil && p.planner.settled
	if err == nil && !noStealing && len(room) < n {
		stolen, err = p.steal(n-len(room), seg, lo, hi, keep)
		p.churnState.stole(len(stolen))
	}
	for err == nil && len(room)+len(stolen)+len(created) < n {
		var pg Page
		if pg, err = p.createPage(len(room) + len(stolen) + len(created)); err == nil {
			created = append(created, pg)
		}
		if keep && !noStealing && isOOM(err) {
			more, serr := p.steal(n-len(room)-len(stolen)-len(created), seg, lo, hi, false)
			stolen = append(stolen, more...)
			p.churnState.stole(len(more))
			if serr != nil || len(room)+len(stolen)+len(created) == n {
				err = serr
			}
			keep = false
		}
	}
	if err != nil {
		if rerr := p.releasePages(append(room, created...)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		if merr := p.mapRun(seg, lo, hi, p.unlend(stolen)); merr != nil && !errors.Is(merr, errShort) {
			err = errors.Join(err, merr)
		}
		return nil, err
	}
	return append(append(room, stolen...), created...), nil
}

// checkRoom refuses growth that needs n new pages when the pool's Limit,
// or the host budget its backend charges (HostBudget), has no room for
// the pages that stealing could not give even if every free byte of the
// pool were whole free pages: the allocation would fail after moving
// pages for nothing. The Limit's refusal is errLimit, the budget's its
// ErrOutOfMemory; the backend is not called.
func (p *Pool) checkRoom(n int) error {
	var free int64 // an upper bound of the pages stealing may give
	if !noStealing {
		u := &p.sinks.own
		free = max(0, u.Reserved.Current-u.Allocated.Current) / p.page
	}
	need := int64(n) - free
	if need <= 0 {
		return nil
	}
	if l := p.cfg.Limit; l > 0 && need*p.page > l-p.held() {
		return errLimit
	}
	if b := budgetOf(p.backend); b != nil {
		return b.check(p.name, need*p.page)
	}
	return nil
}

// createPage creates a page for growth that already gathered pending
// pages, unless one more would pass the pool's Limit (errLimit; the
// backend is not called).
func (p *Pool) createPage(pending int) (Page, error) {
	if l := p.cfg.Limit; l > 0 && p.held()+int64(pending+1)*p.page > l {
		return 0, errLimit
	}
	pg, err := p.vm.CreatePage()
	if err == nil {
		p.sinks.pagesCreated(1)
	}
	return pg, err
}

// shortLived reports whether blocks of role usually die within the step
// that made them: activations, gradients and staging buffers. The rest
// (parameters, optimizer state, library workspaces, and requests of no
// known role, as a replayed PyTorch trace's) may live for the run.
//
// The page boundary (expand, bestRun): a request of whole pages placed at
// the end of the range at the free run's start, inside a page, touches
// one page more than its own and shares its first and last pages with its
// neighbours; at the run's first page boundary it touches only its own,
// for the same new pages. Which neighbour then shares a partly used page
// does not change the free bytes now, only later: a long-lived block that
// shares pages with short-lived ones leaves partly used pages that no
// later step fills, at every step's peak. On PyTorch's traces such blocks
// are the two 32 MiB cuBLAS workspaces that each of 22 of the 24 traces
// allocates among its first step's activations and never frees
// (bench/results/cpu-placement-2026-12-06-s44.md). For blocks that die
// soon the boundary is a loss as often as a gain (strata's gpt2 step's
// 384 MiB attention scores: 14 pages more at the peak; whole-page
// activations of traces scaled by 0.25 or 0.5; eager pools without plans
// never settle), so the rule is held to where long-lived blocks are born
// and nothing else is known: requests of 16 pages or more, of a role
// that may live long, while the pool's planner has made no plan yet (the
// first period). With it the 24 traces at scale 1 go from 2 above 1.02
// reserved/requested to none (small-bf16-ckpt 1.0351 -> 1.0196,
// deep-fp16-ckpt-plain 1.0227 -> 1.0194; mean 1.0073 -> 1.0068;
// bench/results/cpu-placement-2026-12-06-s45.md).
func shortLived(role Role) bool {
	return role == RoleActivation || role == RoleGradient || role == RoleStaging
}
