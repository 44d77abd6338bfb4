package memtest

import (
	"errors"
	"fmt"
	"sync"

	"github.com/strata-ml/strata/memory"
)

// StreamSync is a memory.StreamSync for tests: streams are plain numbers
// whose work "finishes" when the test says so (Complete, CompleteAll) or
// when a pool waits for it. It checks the protocol as it goes (every token
// released exactly once, never used after release) and counts the calls.
// It is safe for concurrent use.
type StreamSync struct {
	mu       sync.Mutex
	next     memory.StreamEvent
	open     map[memory.StreamEvent]fakeEvent // recorded, not yet released
	recorded map[memory.Stream]uint64         // events recorded per stream
	done     map[memory.Stream]uint64         // events completed per stream, in order
	failNext int
	calls    StreamSyncCalls
	errs     []error
}

type fakeEvent struct {
	s   memory.Stream
	seq uint64
}

// StreamSyncCalls counts the calls a StreamSync received.
type StreamSyncCalls struct {
	Records, Queries, Waits, Releases int
	// StreamWaits counts WaitOnStream: device-side waits, which leave the
	// event's stream as it is.
	StreamWaits int
}

// NewStreamSync returns a StreamSync on which no work is queued.
func NewStreamSync() *StreamSync {
	return &StreamSync{
		open:     map[memory.StreamEvent]fakeEvent{},
		recorded: map[memory.Stream]uint64{},
		done:     map[memory.Stream]uint64{},
	}
}

// RecordEvent marks the work on s so far; it fails with memory.ErrInvalidArgument
// while failures are injected (FailNext).
func (f *StreamSync) RecordEvent(s memory.Stream) (memory.StreamEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return 0, fmt.Errorf("memtest: injected failure recording an event on stream %d: %w", s, memory.ErrInvalidArgument)
	}
	f.calls.Records++
	f.recorded[s]++
	f.next++
	f.open[f.next] = fakeEvent{s: s, seq: f.recorded[s]}
	return f.next, nil
}

// Done reports whether the event's stream has completed up to it.
func (f *StreamSync) Done(ev memory.StreamEvent) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.Queries++
	e, ok := f.open[ev]
	if !ok {
		f.errs = append(f.errs, fmt.Errorf("memtest: Done(%d) of a token not handed out or already released", ev))
		return false
	}
	return f.done[e.s] >= e.seq
}

// Wait completes the event's stream up to it, as a blocking wait would.
func (f *StreamSync) Wait(ev memory.StreamEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.Waits++
	e, ok := f.open[ev]
	if !ok {
		err := fmt.Errorf("memtest: Wait(%d) of a token not handed out or already released", ev)
		f.errs = append(f.errs, err)
		return err
	}
	f.done[e.s] = max(f.done[e.s], e.seq)
	return nil
}

// WaitOnStream records a device-side wait of stream s for ev
// (memory.StreamWaiter); the host does not wait and nothing completes.
func (f *StreamSync) WaitOnStream(s memory.Stream, ev memory.StreamEvent) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.StreamWaits++
	if _, ok := f.open[ev]; !ok {
		err := fmt.Errorf("memtest: WaitOnStream(%d, %d) of a token not handed out or already released", s, ev)
		f.errs = append(f.errs, err)
		return err
	}
	return nil
}

// Release takes the token back.
func (f *StreamSync) Release(ev memory.StreamEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls.Releases++
	if _, ok := f.open[ev]; !ok {
		f.errs = append(f.errs, fmt.Errorf("memtest: Release(%d) of a token not handed out or already released", ev))
		return
	}
	delete(f.open, ev)
}

// Complete finishes all the work queued on s so far.
func (f *StreamSync) Complete(s memory.Stream) {
	f.mu.Lock()
	f.done[s] = f.recorded[s]
	f.mu.Unlock()
}

// CompleteAll finishes the work queued on every stream so far.
func (f *StreamSync) CompleteAll() {
	f.mu.Lock()
	for s, n := range f.recorded {
		f.done[s] = n
	}
	f.mu.Unlock()
}

// FailNext makes the next n RecordEvent calls fail.
func (f *StreamSync) FailNext(n int) {
	f.mu.Lock()
	f.failNext = n
	f.mu.Unlock()
}

// Outstanding returns the number of tokens recorded and not yet released.
func (f *StreamSync) Outstanding() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.open)
}

// Calls returns the calls received so far.
func (f *StreamSync) Calls() StreamSyncCalls {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Err returns the protocol violations seen, joined, or nil.
func (f *StreamSync) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}
