package tensor

import (
	"errors"
	"fmt"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// Timer measures where a device's time goes between points of a program,
// as torch.cuda.Event(enable_timing=True) does: Mark records a point in
// the device's queue without waiting for it, and Spans, which waits for
// the last mark, returns for each mark the time the device took from the
// mark before it (its work and its idle time both: a span longer than
// its kernels is a device waiting for the host) beside the host's time
// between the two Mark calls. On a CUDA device a mark is an event
// recorded on the device's stream; on the CPU, whose ops have finished
// when they return, the host clock is both. A Timer is for one goroutine.
type Timer struct {
	dev    Device
	events []*cuda.Event // reused across Resets, one a mark
	marks  []timerMark
}

type timerMark struct {
	name string
	host time.Time
}

// Span is the time between one mark and the one before it.
type Span struct {
	Name string // the later mark's
	// Device is the device's time between the two marks; Host the host's
	// between the two Mark calls.
	Device, Host time.Duration
}

// eventTimer is implemented by devices whose marks are events in a queue.
type eventTimer interface {
	// markEvent records ev (a timing event, made when nil) on the
	// device's stream and returns it.
	markEvent(ev *cuda.Event) (*cuda.Event, error)
}

// NewTimer returns a Timer with no marks on dev.
func NewTimer(dev Device) *Timer { return &Timer{dev: dev} }

// Mark records a point named name; it does not wait for the device. A
// Timer of a nil device records nothing and returns an error wrapping
// ErrDevice.
func (t *Timer) Mark(name string) error {
	if t.dev == nil {
		return fmt.Errorf("tensor: timer mark %q: nil device: %w", name, ErrDevice)
	}
	i := len(t.marks)
	t.marks = append(t.marks, timerMark{name: name, host: time.Now()})
	et, ok := t.dev.backend().(eventTimer)
	if !ok {
		return nil
	}
	var ev *cuda.Event
	if i < len(t.events) {
		ev = t.events[i]
	}
	ev, err := et.markEvent(ev)
	if err != nil {
		t.marks = t.marks[:i]
		return fmt.Errorf("tensor: timer mark %q on %v: %w", name, t.dev, err)
	}
	if i == len(t.events) {
		t.events = append(t.events, ev)
	}
	return nil
}

// Spans waits for the last mark and returns a Span for every mark after
// the first; Reset starts over.
func (t *Timer) Spans() ([]Span, error) {
	if len(t.marks) < 2 {
		return nil, nil
	}
	_, events := t.dev.backend().(eventTimer)
	if events {
		if err := t.events[len(t.marks)-1].Synchronize(); err != nil {
			return nil, fmt.Errorf("tensor: timer on %v: waiting for the last mark: %w", t.dev, err)
		}
	}
	spans := make([]Span, 0, len(t.marks)-1)
	for i := 1; i < len(t.marks); i++ {
		s := Span{Name: t.marks[i].name, Host: t.marks[i].host.Sub(t.marks[i-1].host)}
		s.Device = s.Host
		if events {
			d, err := cuda.ElapsedTime(t.events[i-1], t.events[i])
			if err != nil {
				return nil, fmt.Errorf("tensor: timer on %v: marks %q to %q: %w", t.dev, t.marks[i-1].name, t.marks[i].name, err)
			}
			s.Device = d
		}
		spans = append(spans, s)
	}
	return spans, nil
}

// Reset drops the marks (the events stay, for the next ones).
func (t *Timer) Reset() { t.marks = t.marks[:0] }

// Close releases the timer's events.
func (t *Timer) Close() error {
	var errs []error
	for _, ev := range t.events {
		errs = append(errs, ev.Destroy())
	}
	t.events, t.marks = nil, nil
	return errors.Join(errs...)
}
