package memory

import (
	"errors"
	"fmt"
	"slices"
)

// pendingEvent is one event a freed block waits for: the work queued on
// stream s when the block was freed.
type pendingEvent struct {
	b  *Block
	ev StreamEvent
	s  Stream
}

// RecordStream notes that the live block b is used by work queued on
// stream s as well as on its own stream, like PyTorch's
// Tensor.record_stream. When b is freed, the pool records an event on each
// such stream and does not hand b out again until all of them have
// completed; until then its bytes count as Active but not Allocated. Using
// b on its own stream needs no call; recording a stream twice is harmless.
//
// It needs the pool's StreamSync (PoolConfig.StreamSync): without one, a
// stream other than b's own is refused with ErrInvalidArgument. A nil,
// foreign or freed block is an error too.
func (p *Pool) RecordStream(b *Block, s Stream) error {
	if b == nil {
		return fmt.Errorf("memory: pool %s: RecordStream of a nil block: %w", p.name, ErrInvalidArgument)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recordStream(b, s)
}

// recordStream is RecordStream with p.mu held.
func (p *Pool) recordStream(b *Block, s Stream) error {
	if !b.ownedBy(p) {
		return fmt.Errorf("memory: pool %s: RecordStream of a block it does not own: %w", p.name, ErrDoubleFree)
	}
	if p.closed {
		return fmt.Errorf("memory: pool %s: RecordStream after close: %w", p.name, ErrClosed)
	}
	if b.state != blockLive {
		return fmt.Errorf("memory: pool %s: RecordStream of a freed block: %w", p.name, ErrDoubleFree)
	}
	if s == b.seg.stream || b.cross != nil && slices.Contains(b.cross.uses, s) {
		return nil
	}
	if p.sync == nil {
		return fmt.Errorf("memory: pool %s: block at %#x of stream %#x used on stream %#x, but the pool has no StreamSync to track cross-stream use: %w",
			p.name, b.addr, uintptr(b.seg.stream), uintptr(s), ErrInvalidArgument)
	}
	if b.cross == nil {
		b.cross = new(crossUse)
	}
	b.cross.uses = append(b.cross.uses, s)
	return nil
}

// unrecordStream takes back the record of s that recordStream last
// added to b, for a caller whose work on s was never queued (MigrateOn
// failing before its copy).
func (p *Pool) unrecordStream(b *Block, s Stream) {
	if x := b.cross; x != nil && len(x.uses) > 0 && x.uses[len(x.uses)-1] == s {
		x.uses = x.uses[:len(x.uses)-1]
	}
}

// deferFree parks a freed block that was used on other streams until
// events recorded on each of them complete. A failed recording
// quarantines the block: it is never reused, only released by Close.
func (p *Pool) deferFree(b *Block) error {
	b.state = blockPending
	x := b.cross
	var errs []error
	for _, s := range x.uses {
		ev, err := p.sync.RecordEvent(s)
		if err != nil {
			errs = append(errs, err)
			x.quarantined = true
			continue
		}
		x.events++
		p.pending = append(p.pending, pendingEvent{b: b, ev: ev, s: s})
	}
	x.uses = x.uses[:0]
	if len(errs) > 0 {
		return fmt.Errorf("memory: pool %s: the block at %#x (%s) was freed, but recording events on the streams it was used on failed; it stays out of use until Close: %w",
			p.name, b.addr, FormatBytes(b.size), errors.Join(errs...))
	}
	return nil
}

// processEvents reclaims the pending blocks whose events have completed.
// Events of one stream complete in order, so once one of a stream is not
// done, later ones of that stream are not asked about: a pass costs one
// query per stream with unfinished work, however many blocks wait on it.
// With wait, it blocks until the events complete instead, and returns the
// errors of the waits that failed (their blocks stay pending).
func (p *Pool) processEvents(wait bool) error {
	blocked := p.blocked[:0]
	kept := p.pending[:0]
	var errs []error
	for _, e := range p.pending {
		done := false
		if !slices.Contains(blocked, e.s) {
			if wait {
				if err := p.sync.Wait(e.ev); err != nil {
					errs = append(errs, fmt.Errorf("memory: pool %s: waiting for stream %#x: %w", p.name, uintptr(e.s), err))
				} else {
					done = true
				}
			} else {
				done = p.sync.Done(e.ev)
			}
			if !done {
				blocked = append(blocked, e.s)
			}
		}
		if !done {
			kept = append(kept, e)
			continue
		}
		p.settle(e)
	}
	clear(p.pending[len(kept):])
	p.pending = kept
	p.blocked = blocked[:0]
	return errors.Join(errs...)
}

// settle releases the finished event e (taken out of p.pending) and
// reclaims its block once none of its events is left, unless quarantined.
func (p *Pool) settle(e pendingEvent) {
	p.sync.Release(e.ev)
	b := e.b
	b.cross.events--
	if b.cross.events == 0 && !b.cross.quarantined {
		p.sinks.blockReclaimed(b.size)
		p.reclaim(b)
	}
}

// dropEvents waits for every pending event and releases it, for Close: the
// memory is about to go back to the backend, which must not happen under
// work that still uses it. Pending blocks stay pending; close releases
// them with their segments.
func (p *Pool) dropEvents() error {
	var errs []error
	for _, e := range p.pending {
		if err := p.sync.Wait(e.ev); err != nil {
			errs = append(errs, fmt.Errorf("memory: pool %s: waiting for stream %#x before releasing its memory: %w", p.name, uintptr(e.s), err))
		}
		p.sync.Release(e.ev)
	}
	clear(p.pending)
	p.pending = p.pending[:0]
	return errors.Join(errs...)
}

// reuseWaiting is what a pool at its limit does with the blocks pending
// on other streams' work before it releases cached segments: reuse those
// of stream s with a wait on the device (reclaimOnStream), then wait for
// the rest on the host (waitFor), until a free block of rounded bytes on
// s can be taken. It returns the block, nil when none fits, or an error.
func (p *Pool) reuseWaiting(rounded int64, s Stream) (*Block, error) {
	b, err := p.reclaimOnStream(rounded, s)
	if b == nil && err == nil {
		b, err = p.waitFor(rounded, s)
	}
	return b, err
}

// waitFor waits for pending blocks' events, the oldest first, reclaiming
// what completed after each wait, until a free block of rounded bytes on
// stream s can be taken; it returns the block, or nil once nothing is
// pending (or a wait failed: its error). A pool at its limit waits this
// way instead of for every pending event at once: blocks freed behind
// copies still in flight (activation offload, tensor.MoveTo) would
// otherwise hold the host until the copy stream had drained, and the
// device's stream would run dry behind it.
func (p *Pool) waitFor(rounded int64, s Stream) (*Block, error) {
	for len(p.pending) > 0 {
		e := p.pending[0]
		if err := p.sync.Wait(e.ev); err != nil {
			return nil, fmt.Errorf("memory: pool %s: waiting for stream %#x: %w", p.name, uintptr(e.s), err)
		}
		// Settled on Wait's word, not Done's, which may not know (a
		// StreamSync that cannot query without blocking): asking Done
		// would leave it pending, and the pool waiting for it for ever.
		p.pending = slices.Delete(p.pending, 0, 1)
		p.settle(e)
		_ = p.processEvents(false) // others may be done by now
		if b := p.takeFree(rounded, s); b != nil {
			return b, nil
		}
	}
	return nil, nil
}

// reclaimOnStream reuses blocks of stream s's segments that are pending on
// other streams' work, the oldest first, by making s wait for that work on
// the device (StreamWaiter) instead of the host, until a free block of
// rounded bytes on s can be taken; it returns the block, or nil when the
// StreamSync cannot wait on a stream or no such block is left. Blocks
// pending on several events are left to waitFor. The host goes on
// queueing; the device waits only if the other stream's work (a copy of
// tensor.MoveTo, typically long done by then) still runs when s reaches
// the wait.
func (p *Pool) reclaimOnStream(rounded int64, s Stream) (*Block, error) {
	w, ok := p.sync.(StreamWaiter)
	if !ok {
		return nil, nil
	}
	for i := 0; i < len(p.pending); {
		e := p.pending[i]
		b := e.b
		if b.seg.stream != s || b.cross.events != 1 || b.cross.quarantined || e.s == s {
			i++
			continue
		}
		if err := w.WaitOnStream(s, e.ev); err != nil {
			return nil, fmt.Errorf("memory: pool %s: ordering stream %#x after stream %#x: %w", p.name, uintptr(s), uintptr(e.s), err)
		}
		p.pending = slices.Delete(p.pending, i, i+1)
		p.settle(e) // its one event: the block is free now
		if nb := p.takeFree(rounded, s); nb != nil {
			return nb, nil
		}
	}
	return nil, nil
}
