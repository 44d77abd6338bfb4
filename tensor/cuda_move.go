package tensor

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// cudaCopier is a device's copy stream (MoveTo): copies between tiers
// that run on the GPU's copy engines while the device's stream computes.
// It is a stream of its own, not the side stream, so that a move never
// waits behind an optimizer update queued there.
//
// Ordering: before each MoveTo the copy stream waits for an event
// recorded on the device's stream (the moved bytes are written), and for
// each storage's fence (side-stream or earlier copy work on it); after
// the copies it records an event that becomes the storages' fence, which
// the device's stream joins at their first use (storage.joinFence). The
// manager holds the old and the new blocks for the copy stream
// (memory.Manager.MigrateOn), so neither is handed out again under a copy.
// Events come from a ring: a fence whose event was recorded again by a
// later move waits for that later copy too, which is longer, never too
// short.
type cudaCopier struct {
	once   sync.Once
	ready  atomic.Bool // made without error: Synchronize waits for it
	err    error
	stream *cuda.Stream
	q      streamQueue
	memS   memory.Stream
	start  *cuda.Event // recorded on the device's stream
	mu     sync.Mutex  // guards ring, next
	ring   []*cuda.Event
	next   int
}

// copierEvents is the size of the copy stream's event ring.
const copierEvents = 256

// copier returns d's copy stream, creating it on first use.
func (d *cudaDevice) copier(op string) *cudaCopier {
	c := &d.copy
	c.once.Do(func() {
		var err error
		// The greatest priority, as the side stream (cuda_side.go): a
		// move's few blocks take an SM as soon as one frees, so the
		// compute that waits for the move (a block's input brought back
		// ahead of its backward) does not wait behind the compute it
		// was to overlap.
		if c.stream, err = d.ctx.NewStreamPriority(cuda.PriorityHighest); err != nil {
			c.err = err
			return
		}
		c.q = newStreamQueue(d, c.stream)
		if c.memS, err = d.streams.Stream(c.stream); err != nil {
			c.err = err
			return
		}
		if c.start, err = d.ctx.NewEvent(cuda.EventDisableTiming); err != nil {
			c.err = err
			return
		}
		c.ring = make([]*cuda.Event, copierEvents)
		for i := range c.ring {
			if c.ring[i], err = d.ctx.NewEvent(cuda.EventDisableTiming); err != nil {
				c.err = err
				return
			}
		}
		c.ready.Store(true)
	})
	if c.err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("creating the copy stream of %v", d), Err: c.err})
	}
	return c
}

// syncCopy waits for the copy stream, when there is one.
func (d *cudaDevice) syncCopy() error {
	if !d.copy.ready.Load() {
		return nil
	}
	return d.copy.q.sync()
}

// moveTo queues the moves of sts to tier on d's copy stream and fences
// them on the copies' event. d.mu is held throughout: no op is queued on
// the device's stream between the event the copies wait for and the
// blocks the moves take from the pool, whose last users must all be
// before that event.
func (d *cudaDevice) moveTo(op string, tier memory.Tier, sts []*storage) error {
	d.refuseInCapture(op, "moving tensors between memory tiers")
	c := d.copier(op)
	c.mu.Lock()
	defer c.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	err := c.start.Record(d.stream)
	if err == nil {
		err = c.stream.WaitEvent(c.start)
	}
	d.check(op, "ordering the copy stream after the device's", err)
	var errs []error
	var moved []*storage
	fenced := false
	defer func() {
		if !fenced && len(moved) > 0 {
			// A panic after some moves were queued (a later move's
			// failure, a driver error): ops already read the moved
			// storages at their new addresses, so they are fenced as on
			// success; the panic's error is the one to report.
			_ = c.fence(d, moved)
		}
	}()
	for _, st := range sts {
		if f := st.fence.Load(); f != nil {
			d.check(op, "ordering the copy stream after a fence", c.stream.WaitEvent(f.ev))
		}
		var before []byte
		from, addr := st.alloc.Tier(), st.alloc.Addr()
		if moveVerify {
			before = d.verifyBefore(st)
		}
		if err := d.mem.MigrateOn(st.alloc, tier, c.memS); err != nil {
			var oom *memory.OOMError
			if !errors.As(err, &oom) {
				panic(&OpError{Op: op, Msg: fmt.Sprintf("moving %s to %s", memory.FormatBytes(st.nbytes), tier), Err: err})
			}
			errs = append(errs, fmt.Errorf("tensor: moving %s to %s: %w", memory.FormatBytes(st.nbytes), tier, err))
			continue
		}
		moved = append(moved, st)
		if moveVerify {
			d.verifyAfter(st, from, addr, before)
		}
	}
	if len(moved) == 0 {
		return errors.Join(errs...)
	}
	fenced = true
	d.check(op, "recording the copies' event", c.fence(d, moved))
	return errors.Join(errs...)
}

// fence makes an event recorded after the copies queued on c the fence
// of sts, the storages they moved. When the event cannot be recorded it
// waits for the copies instead, so that either way no later reader of
// sts races them.
func (c *cudaCopier) fence(d *cudaDevice, sts []*storage) error {
	ev := c.ring[c.next]
	c.next = (c.next + 1) % len(c.ring)
	if err := ev.Record(c.stream); err != nil {
		return errors.Join(err, c.q.sync())
	}
	f := &sideFence{d: d, ev: ev, on: c.stream}
	for _, st := range sts {
		st.fence.Store(f)
	}
	return nil
}
