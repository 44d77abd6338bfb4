package cuda

import (
	"fmt"
	"math"
	"time"
)

// EventFlags are cuEventCreate flags.
type EventFlags uint32

const (
	// EventDefault records timing and spins when synchronised.
	EventDefault EventFlags = 0x0
	// EventBlockingSync makes Synchronize sleep instead of spin.
	EventBlockingSync EventFlags = 0x1
	// EventDisableTiming makes the event cheaper; ElapsedTime then fails.
	EventDisableTiming EventFlags = 0x2
)

// Event is a CUDA event of one context: a marker in a stream that the
// host can wait for or time, and that other streams can wait on. Its
// methods may run concurrently, except Destroy, which must not race with
// any other use of the event.
type Event struct {
	ctx       *Context
	h         uintptr
	flags     EventFlags
	destroyed bool
}

// NewEvent creates an event with the given flags.
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	if flags&^(EventBlockingSync|EventDisableTiming) != 0 {
		return nil, invalidArg("NewEvent", "unknown flags %#x", uint32(flags))
	}
	f := getFrame()
	defer f.release()
	if s := c.invoke(f, c.drv.eventCreate, f.outAddr(0), uintptr(flags)); !s.ok() {
		return nil, s.err(c.dev.String())
	}
	return &Event{ctx: c, h: uintptr(f.out[0]), flags: flags}, nil
}

// Handle returns the CUevent.
func (e *Event) Handle() uintptr { return e.h }

func (e *Event) String() string { return fmt.Sprintf("event %#x", e.h) }

func (e *Event) usable(op string) error {
	if e == nil {
		return invalidArg(op, "nil event")
	}
	if e.destroyed {
		return invalidArg(op, "%s was destroyed", e)
	}
	if e.ctx == nil {
		return invalidArg(op, "%s was not made by NewEvent", e)
	}
	return nil
}

// Record captures the work queued on s so far (nil: the default stream);
// the event completes when that work has.
func (e *Event) Record(s *Stream) error {
	if err := e.usable("Event.Record"); err != nil {
		return err
	}
	sh, err := e.ctx.streamHandle("Event.Record", s)
	if err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := e.ctx.invoke(f, e.ctx.drv.eventRecord, e.h, sh); !st.ok() {
		return st.err(fmt.Sprintf("%s on %s", e, s))
	}
	return nil
}

// Synchronize blocks until the event has completed.
func (e *Event) Synchronize() error {
	if err := e.usable("Event.Synchronize"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := e.ctx.invoke(f, e.ctx.drv.eventSynchronize, e.h); !st.ok() {
		return st.err(e.String())
	}
	return nil
}

// Query reports whether the event has completed, without blocking.
func (e *Event) Query() (bool, error) {
	if err := e.usable("Event.Query"); err != nil {
		return false, err
	}
	f := getFrame()
	defer f.release()
	st := e.ctx.invoke(f, e.ctx.drv.eventQuery, e.h)
	switch st.code {
	case cudaSuccess:
		return true, nil
	case cudaErrorNotReady:
		return false, nil
	}
	return false, st.err(e.String())
}

// Destroy releases the event. Destroying a destroyed event is a no-op.
func (e *Event) Destroy() error {
	if e != nil && e.destroyed {
		return nil
	}
	if err := e.usable("Event.Destroy"); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if st := e.ctx.invoke(f, e.ctx.drv.eventDestroy, e.h); !st.ok() {
		return st.err(e.String())
	}
	e.destroyed = true
	return nil
}

// ElapsedTime returns the GPU time between two completed events of one
// context (resolution about 0.5 µs). Both must have been created without
// EventDisableTiming.
func ElapsedTime(start, end *Event) (time.Duration, error) {
	for _, e := range []*Event{start, end} {
		if err := e.usable("ElapsedTime"); err != nil {
			return 0, err
		}
		if e.flags&EventDisableTiming != 0 {
			return 0, invalidArg("ElapsedTime", "%s was created with EventDisableTiming", e)
		}
	}
	if start.ctx != end.ctx {
		return 0, invalidArg("ElapsedTime", "events of different contexts (%s, %s)", start.ctx.dev, end.ctx.dev)
	}
	c := start.ctx
	f := getFrame()
	defer f.release()
	if st := c.invoke(f, c.drv.eventElapsed, f.outAddr(0), start.h, end.h); !st.ok() {
		return 0, st.err(fmt.Sprintf("from %s to %s", start, end))
	}
	ms := math.Float32frombits(uint32(f.out[0]))
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
