package memory

import (
	"errors"
	"fmt"
)

// EmptyCache gives every fully free segment back to the backend. Segments
// that still hold a live block stay. Blocks freed after use on other
// streams are waited for first (like torch.cuda.empty_cache), so their
// segments can go too. Errors of the backend are joined; the segments they
// concern are dropped from the pool all the same, since their state is
// unknown.
func (p *Pool) EmptyCache() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("memory: pool %s: EmptyCache after close: %w", p.name, ErrClosed)
	}
	return p.emptyCache()
}

// emptyCache is EmptyCache with p.mu held.
func (p *Pool) emptyCache() error {
	var werr error
	if len(p.pending) > 0 {
		werr = p.processEvents(true)
	}
	_, err := p.releaseCached()
	return errors.Join(werr, err)
}

// releaseCached releases the fully free segments, except those of held
// streams (StreamHolder), and returns their bytes.
func (p *Pool) releaseCached() (int64, error) {
	h := p.holder()
	return p.releaseStreams(func(s Stream) bool { return !heldBy(h, s) })
}

// flushCache is releaseCached for an allocation that found no room: it
// counts a cache flush (Usage.CacheFlushes) when any bytes went.
func (p *Pool) flushCache() (int64, error) {
	n, err := p.releaseCached()
	if n > 0 {
		p.sinks.cacheFlush()
	}
	return n, err
}

// releaseStreams releases the cache of the streams take accepts: their
// fully free classic segments (held streams' too, if take accepts them)
// and the free pages of their expandable segments (never held streams':
// releaseExpandable), and returns the bytes released.
func (p *Pool) releaseStreams(take func(Stream) bool) (int64, error) {
	released, err := p.releaseFree(take)
	if p.vm != nil {
		n, xerr := p.releaseExpandable(take)
		released += n
		err = errors.Join(err, xerr)
	}
	return released, err
}

// releaseFree releases the fully free classic segments of the streams
// take accepts and returns their bytes.
func (p *Pool) releaseFree(take func(Stream) bool) (int64, error) {
	var released int64
	var errs []error
	for seg := p.segs; seg != nil; {
		next := seg.next
		if seg.live == 0 && seg.x == nil && take(seg.stream) {
			b := seg.first
			if b.next != nil || b.size != seg.region.Size || b.state != blockFree {
				panic(fmt.Sprintf("memory: pool %s: free segment at %#x not coalesced", p.name, seg.region.Addr))
			}
			p.treeOf(seg).delete(seg.stream, b)
			p.recycle(b)
			released += seg.region.Size
			if err := p.release(seg); err != nil {
				errs = append(errs, err)
			}
		}
		seg = next
	}
	return released, errors.Join(errs...)
}

// link puts seg at the head of the pool's list of segments.
func (p *Pool) link(seg *segment) {
	seg.next = p.segs
	if p.segs != nil {
		p.segs.prev = seg
	}
	p.segs = seg
	p.nsegs++
}

// unlink takes seg out of the pool's list of segments.
func (p *Pool) unlink(seg *segment) {
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
}

// release unlinks a segment and gives its region back to the backend.
func (p *Pool) release(seg *segment) error {
	p.unlink(seg)
	p.sinks.segmentReleased(seg.region.Size)
	if p.hist != nil {
		p.hist.segment(EventRelease, p.tier, seg, seg.region.Addr, seg.region.Size)
	}
	if err := p.backend.Free(seg.region); err != nil {
		return fmt.Errorf("memory: pool %s: releasing a %s segment at %#x: %w", p.name, FormatBytes(seg.region.Size), seg.region.Addr, err)
	}
	return nil
}

// Close gives every segment back to the backend, live blocks included, and
// makes later calls fail with ErrClosed. When blocks were still live, it
// returns an error wrapping ErrLeaked that says how many and how large.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("memory: pool %s: closed twice: %w", p.name, ErrClosed)
	}
	u := p.sinks.own
	leaked := u.Allocs - u.Frees // live blocks (pending ones count as freed)
	err := p.close()
	if leaked > 0 {
		err = errors.Join(fmt.Errorf("memory: pool %s closed with %d live blocks (%s requested, %s allocated); their memory was released: %w",
			p.name, leaked, FormatBytes(u.Requested.Current), FormatBytes(u.Allocated.Current), ErrLeaked), err)
	}
	return err
}

// close releases every segment with p.mu held and returns the backend's
// errors. Live blocks are released too; their bytes leave the statistics
// without counting as frees (the history records them as EventFree, so
// that its bytes end where the statistics do).
func (p *Pool) close() error {
	p.closed = true
	var errs []error
	if len(p.pending) > 0 {
		errs = append(errs, p.dropEvents())
	}
	if p.vm != nil && p.staleBytes > 0 {
		// Lent pages are unmapped where they are stale first, held
		// streams' too: a page lent from one segment of a held stream to
		// another is released with the latter, which may be closed first.
		if err := p.vm.Sync(); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, p.sweepStaleBut(nil))
		}
	}
	for p.segs != nil {
		seg := p.segs
		for b := seg.first; b != nil; b = b.next {
			switch b.state {
			case blockLive:
				if p.hist != nil { // the history's bytes follow the statistics'
					p.hist.free(p.tier, b)
				}
				p.sinks.each(func(u *liveUsage) { u.dropBytes(b.size, b.requested) })
			case blockPending:
				p.sinks.blockReclaimed(b.size)
			}
			b.state = blockDead // Addr and Host of a leaked block now return nothing
		}
		p.sinks.spannedBy(-seg.spanned())
		release := p.release
		if seg.x != nil {
			release = p.closeExpandable
		}
		if err := release(seg); err != nil {
			errs = append(errs, err)
		}
	}
	p.small.clear()
	p.large.clear()
	p.spare = nil
	return errors.Join(errs...)
}

// Stats returns the pool's statistics.
func (p *Pool) Stats() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sinks.own.snapshot()
}

// ResetPeaks lowers every peak statistic to its current value.
func (p *Pool) ResetPeaks() {
	p.mu.Lock()
	p.sinks.own.ResetPeaks()
	p.mu.Unlock()
}
