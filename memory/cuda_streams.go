package memory

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strata-ml/strata/cuda"
)

// CUDAStreams is the StreamSync of a CUDA context, and the table that
// turns the pools' opaque Streams back into *cuda.Stream values. A Stream
// is a stream's CUstream handle; 0 is the legacy default stream, which
// needs no registration. Any other stream is registered once with Stream
// before it is used with the manager (allocations, RecordStream,
// prefetches), and forgotten with Forget before it is destroyed.
//
// Events come from a free list: each RecordEvent reuses a released
// cuEvent (created with CU_EVENT_DISABLE_TIMING, the cheap kind) or makes
// one, so a steady state of cross-stream frees creates no events. It is
// safe for concurrent use.
type CUDAStreams struct {
	ctx *cuda.Context

	mu      sync.Mutex
	streams map[Stream]*cuda.Stream
	private int             // private streams made so far
	held    map[Stream]bool // streams whose segments EmptyCache keeps
	events  []*cuda.Event   // the event of token i+1
	spare   []StreamEvent   // released tokens
	closed  bool
}

// NewCUDAStreams returns an empty table for ctx. It panics if ctx is nil
// (a programming error).
func NewCUDAStreams(ctx *cuda.Context) *CUDAStreams {
	if ctx == nil {
		panic("memory: NewCUDAStreams: nil *cuda.Context")
	}
	return &CUDAStreams{ctx: ctx, streams: make(map[Stream]*cuda.Stream)}
}

// Stream registers s and returns the Stream that stands for it in
// allocations and RecordStream; nil gives 0, the default stream. A stream
// of another context is refused with ErrInvalidArgument.
func (c *CUDAStreams) Stream(s *cuda.Stream) (Stream, error) {
	if s == nil {
		return 0, nil
	}
	if s.Context() != c.ctx {
		return 0, fmt.Errorf("memory: CUDAStreams of %s: %s belongs to %s: %w", c.ctx.Device(), s, s.Context().Device(), ErrInvalidArgument)
	}
	id := Stream(s.Handle())
	c.mu.Lock()
	c.streams[id] = s
	c.mu.Unlock()
	return id, nil
}

// Forget removes s from the table, before it is destroyed (its handle may
// then be reused by a new stream).
func (c *CUDAStreams) Forget(s *cuda.Stream) {
	if s == nil {
		return
	}
	c.mu.Lock()
	delete(c.streams, Stream(s.Handle()))
	c.mu.Unlock()
}

// CUDA returns the *cuda.Stream that s stands for: nil for 0, the
// registered stream otherwise. An unregistered stream is an error wrapping
// ErrInvalidArgument.
func (c *CUDAStreams) CUDA(s Stream) (*cuda.Stream, error) {
	if s == 0 {
		return nil, nil
	}
	c.mu.Lock()
	st, ok := c.streams[s]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("memory: stream %#x of %s is not registered: pass each *cuda.Stream through CUDAStreams.Stream before using it with the memory manager: %w",
			uintptr(s), c.ctx.Device(), ErrInvalidArgument)
	}
	return st, nil
}

// Private returns a new pool stream that stands for no CUDA stream: a
// private pool, whose cached blocks only allocations on it reuse (a
// captured CUDA graph's: tensor.CaptureGraph allocates on it while it
// captures). Its numbers are odd, so they never equal a stream handle (an
// aligned address). Recording events on it is refused.
func (c *CUDAStreams) Private() Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.private++
	return Stream(2*c.private + 1)
}

// Hold makes EmptyCache and the out-of-memory retry keep the segments of
// stream s (held) or lets them go again; CUDAStreams is then the pools'
// StreamHolder.
func (c *CUDAStreams) Hold(s Stream, held bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held == nil {
		c.held = map[Stream]bool{}
	}
	if held {
		c.held[s] = true
	} else {
		delete(c.held, s)
	}
}

// Held reports whether stream s is held (StreamHolder).
func (c *CUDAStreams) Held(s Stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[s]
}

// RecordEvent records an event on stream s and returns its token.
func (c *CUDAStreams) RecordEvent(s Stream) (StreamEvent, error) {
	st, err := c.CUDA(s)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("memory: CUDAStreams of %s: RecordEvent after Close: %w", c.ctx.Device(), ErrClosed)
	}
	var tok StreamEvent
	if n := len(c.spare); n > 0 {
		tok = c.spare[n-1]
		c.spare = c.spare[:n-1]
	} else {
		ev, err := c.ctx.NewEvent(cuda.EventDisableTiming)
		if err != nil {
			return 0, fmt.Errorf("memory: CUDAStreams of %s: creating an event: %w", c.ctx.Device(), err)
		}
		c.events = append(c.events, ev)
		tok = StreamEvent(len(c.events))
	}
	if err := c.events[tok-1].Record(st); err != nil {
		c.spare = append(c.spare, tok)
		return 0, fmt.Errorf("memory: CUDAStreams of %s: recording an event on %s: %w", c.ctx.Device(), st, err)
	}
	return tok, nil
}

// event returns the event of token ev, or nil for a token never handed out.
func (c *CUDAStreams) event(ev StreamEvent) *cuda.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev == 0 || int(ev) > len(c.events) || c.closed {
		return nil
	}
	return c.events[ev-1]
}

// Done queries the event (cuEventQuery) without blocking. A query that
// fails (the context is broken) reports false, so the memory stays out of
// use; Wait reports the error.
func (c *CUDAStreams) Done(ev StreamEvent) bool {
	e := c.event(ev)
	if e == nil {
		return false
	}
	done, err := e.Query()
	return err == nil && done
}

// Wait blocks until the event has completed (cuEventSynchronize).
func (c *CUDAStreams) Wait(ev StreamEvent) error {
	e := c.event(ev)
	if e == nil {
		return fmt.Errorf("memory: CUDAStreams of %s: wait for unknown event token %d: %w", c.ctx.Device(), ev, ErrInvalidArgument)
	}
	if err := e.Synchronize(); err != nil {
		return fmt.Errorf("memory: CUDAStreams of %s: %w", c.ctx.Device(), err)
	}
	return nil
}

// WaitOnStream makes stream s wait for the event on the device
// (cuStreamWaitEvent): StreamWaiter. The wait takes the event's record as
// it is now, so the token may be released and recorded again at once.
func (c *CUDAStreams) WaitOnStream(s Stream, ev StreamEvent) error {
	e := c.event(ev)
	if e == nil {
		return fmt.Errorf("memory: CUDAStreams of %s: stream wait for unknown event token %d: %w", c.ctx.Device(), ev, ErrInvalidArgument)
	}
	st, err := c.CUDA(s)
	if err != nil {
		return err
	}
	if err := st.WaitEvent(e); err != nil {
		return fmt.Errorf("memory: CUDAStreams of %s: %w", c.ctx.Device(), err)
	}
	return nil
}

// Release puts the token's event back on the free list.
func (c *CUDAStreams) Release(ev StreamEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev == 0 || int(ev) > len(c.events) || c.closed {
		return
	}
	c.spare = append(c.spare, ev)
}

// Events returns the number of events made and how many of them are
// free, for tests and diagnosis.
func (c *CUDAStreams) Events() (made, free int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.events), len(c.spare)
}

// Close destroys every event; later RecordEvent calls fail with ErrClosed.
// Close the managers that use the table first: they wait for and release
// their tokens when they close.
func (c *CUDAStreams) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, e := range c.events {
		if err := e.Destroy(); err != nil {
			errs = append(errs, err)
		}
	}
	c.events, c.spare = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("memory: CUDAStreams of %s: destroying events: %w", c.ctx.Device(), err)
	}
	return nil
}
