package memory

import (
	"errors"
	"fmt"
)

// errLimit is the internal cause of a reservation the Limit refused.
var errLimit = errors.New("limit")

// grow reserves a new segment for a request of size bytes (rounded) on
// stream s and returns its single free block. When the backend is out of
// memory or the limit is reached, it first reuses the blocks of stream s
// pending on other streams' work by making s wait for that work on the
// device (reclaimOnStream), then waits for the rest on the host, the
// oldest first, until a cached block fits (waitFor); else it
// releases every cached segment, and the cache of the pools that share its
// Limit (a device pool's managed tier: releaseShared), and tries once
// more; if that fails too the error is an *OOMError.
//
// A failed wait (werr) does not end it there: like the backend's out of
// memory, it leaves the cache to release and the retry to make, as
// PyTorch's allocator releases cached blocks and retries after
// cudaMalloc's out of memory; its blocks stay pending, which is safe
// (their segments are not fully free, so nothing under them is released).
// When the allocation still fails, the *OOMError carries the wait's error
// (OOMError.Wait); when it succeeds, the pending blocks are waited for
// again by EmptyCache and Close, which report the error if it persists.
func (p *Pool) grow(size, rounded int64, s Stream, role Role) (*Block, error) {
	if p.vm != nil {
		return p.growExpandable(size, rounded, s, role)
	}
	segSize := SegmentSize(rounded)
	r, err := p.reserve(segSize)
	var werr error
	if err != nil && isOOM(err) && len(p.pending) > 0 {
		var b *Block
		if b, werr = p.reuseWaiting(rounded, s); b != nil {
			return b, nil
		}
	}
	if err != nil && isOOM(err) {
		released, relErr := p.flushCache()
		if relErr != nil {
			return nil, errors.Join(relErr, werr)
		}
		shared, relErr := p.releaseSharedCache(false)
		if relErr != nil {
			return nil, errors.Join(relErr, werr)
		}
		if released+shared > 0 {
			r, err = p.reserve(segSize)
		}
	}
	if retry, relErr := p.peersFreed(err); relErr != nil {
		return nil, errors.Join(relErr, werr)
	} else if retry {
		r, err = p.reserve(segSize)
	}
	if err != nil {
		if !isOOM(err) {
			return nil, errors.Join(fmt.Errorf("memory: pool %s: reserving a %s segment for %s: %w",
				p.name, FormatBytes(segSize), FormatBytes(size), err), werr)
		}
		p.sinks.oom()
		return nil, p.oomAfterWait(size, err, werr)
	}
	seg := p.newSegment(r, s, isSmall(rounded))
	seg.mapped = r.Size
	b := p.newBlock()
	b.seg = seg
	b.addr = r.Addr
	b.size = segSize
	b.state = blockFree
	seg.first = b
	p.link(seg)
	p.sinks.segmentReserved(segSize)
	if p.hist != nil {
		p.hist.segment(EventReserve, p.tier, seg, r.Addr, segSize)
	}
	return b, nil
}

// peersFreed releases, when err is the refusal of a HostBudget that other
// pools of the manager charge too (not the pool's Limit), their cache
// (releasePeers), and reports whether that made room to retry.
func (p *Pool) peersFreed(err error) (bool, error) {
	if err == nil || p.releasePeers == nil || errors.Is(err, errLimit) || !errors.Is(err, ErrOutOfMemory) {
		return false, nil
	}
	n, relErr := p.releasePeers()
	return n > 0, relErr
}

func isOOM(err error) bool { return errors.Is(err, errLimit) || errors.Is(err, ErrOutOfMemory) }

// reserve gets a region of size bytes from the backend, unless that would
// pass the limit (errLimit, the backend is not called).
func (p *Pool) reserve(size int64) (Region, error) {
	if l := p.cfg.Limit; l > 0 && p.held()+size > l {
		return Region{}, errLimit
	}
	r, err := p.backend.Alloc(size)
	if err != nil {
		return Region{}, err
	}
	if r.Size != size || r.Addr == 0 || (r.Host != nil && int64(len(r.Host)) != size) {
		ferr := p.backend.Free(r)
		return Region{}, errors.Join(fmt.Errorf("memory: backend %s returned a bad region for %d bytes (addr %#x, size %d, host view of %d bytes): %w",
			p.name, size, r.Addr, r.Size, len(r.Host), ErrInvalidArgument), ferr)
	}
	return r, nil
}

// oomAfterWait is oomError with werr, a failed wait for blocks pending on
// other streams' work (reuseWaiting; nil when none failed).
func (p *Pool) oomAfterWait(size int64, cause, werr error) *OOMError {
	e := p.oomError(size, cause)
	e.Wait = werr
	return e
}

// oomError describes a failed allocation of size bytes.
func (p *Pool) oomError(size int64, cause error) *OOMError {
	if errors.Is(cause, errLimit) {
		cause = nil
	}
	u := &p.sinks.own
	e := &OOMError{
		Tier:                p.backend.Tier(),
		Backend:             p.name,
		Requested:           size,
		Limit:               p.cfg.Limit,
		Shared:              p.sharedBytes(),
		Held:                p.external,
		Allocated:           u.Allocated.Current,
		Reserved:            u.Reserved.Current,
		ReservedUnallocated: u.Reserved.Current - u.Allocated.Current,
		DeviceFree:          -1,
		DeviceTotal:         -1,
		Cause:               cause,
	}
	if free, total, ok := p.backend.Info(); ok {
		e.DeviceFree, e.DeviceTotal = free, total
	}
	e.Host = hostMemory(p.backend)
	if b := budgetOf(p.backend); b != nil {
		e.Budget, e.BudgetSource = b.limit, b.source
	}
	return e
}
