package dist

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/nccl"
	"github.com/strata-ml/strata/tensor"
)

var _ AsyncCollective = (*ncclRank)(nil)

// commStream is a rank's communication stream and its events, made on
// the first StartAllReduceSum.
type commStream struct {
	stream *cuda.Stream
	ready  *cuda.Event   // recorded on the device's stream, waited for by stream
	free   []*cuda.Event // done events not in use
	all    []*cuda.Event // every event made, destroyed by Close
}

// comms returns the rank's communication stream, making it first: a
// non-blocking stream of the device's context at the device's stream's
// priority, cuda.PriorityHigh, above every default stream (NCCL's kernels
// wait for the peers; queued behind backward's kernels they would delay
// every rank), with the event that orders it after the device's stream.
func (r *ncclRank) comms() (*commStream, error) {
	if r.cs != nil {
		return r.cs, nil
	}
	ctx := r.stream.Context()
	s, err := ctx.NewStreamPriority(cuda.PriorityHigh)
	if err != nil {
		return nil, fmt.Errorf("dist: rank %d: creating the communication stream: %w", r.rank, err)
	}
	ev, err := ctx.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("dist: rank %d: creating an event: %w", r.rank, err), s.Destroy())
	}
	r.cs = &commStream{stream: s, ready: ev, all: []*cuda.Event{ev}}
	return r.cs, nil
}

// doneEvent is a free event of cs, made when none is.
func (r *ncclRank) doneEvent(cs *commStream) (*cuda.Event, error) {
	if n := len(cs.free); n > 0 {
		e := cs.free[n-1]
		cs.free = cs.free[:n-1]
		return e, nil
	}
	e, err := r.stream.Context().NewEvent(cuda.EventDisableTiming)
	if err != nil {
		return nil, fmt.Errorf("dist: rank %d: creating an event: %w", r.rank, err)
	}
	cs.all = append(cs.all, e)
	return e, nil
}

// StartAllReduceSum queues AllReduceSum(t) on the rank's communication
// stream, ordered by events: an event recorded on the device's stream
// (after the ops queued so far, the copy of the bucket among them), the
// communication stream waiting for it, ncclAllReduce there, and an event
// recorded after it. wait makes the device's stream wait for that event:
// every op queued after wait runs after the all-reduce, and the host
// never waits. The checks, the comparison with the other ranks' calls
// and the failure of the group are those of AllReduceSum.
func (r *ncclRank) StartAllReduceSum(t *tensor.Tensor) (wait func() error, err error) {
	defer func() {
		if err != nil {
			err = r.failed(err)
		}
	}()
	dt, p, n, err := r.begin(opAllReduce, t)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return func() error { return nil }, nil
	}
	cs, err := r.comms()
	if err != nil {
		return nil, err
	}
	done, err := r.doneEvent(cs)
	if err != nil {
		return nil, err
	}
	if err := cs.ready.Record(r.stream); err != nil {
		return nil, fmt.Errorf("dist: rank %d: recording the bucket's event: %w", r.rank, err)
	}
	if err := cs.stream.WaitEvent(cs.ready); err != nil {
		return nil, fmt.Errorf("dist: rank %d: ordering the communication stream: %w", r.rank, err)
	}
	if err := r.comm.AllReduce(p, p, n, dt, nccl.Sum, cs.stream); err != nil {
		return nil, err
	}
	if err := done.Record(cs.stream); err != nil {
		return nil, fmt.Errorf("dist: rank %d: recording the all-reduce's event: %w", r.rank, err)
	}
	return func() error {
		err := r.stream.WaitEvent(done)
		cs.free = append(cs.free, done) // the wait is queued: the event may be recorded again
		if err != nil {
			err = fmt.Errorf("dist: rank %d: ordering the device's stream after the all-reduce: %w", r.rank, err)
			r.g.fail(fmt.Errorf("%w: rank %d: %w", ErrAborted, r.rank, err))
		}
		return err
	}, nil
}

// closeComms destroys the rank's communication stream and events (after
// its communicator, whose collectives it may still hold).
func (r *ncclRank) closeComms() error {
	cs := r.cs
	if cs == nil {
		return nil
	}
	r.cs = nil
	var errs []error
	if err := cs.stream.Synchronize(); err != nil {
		errs = append(errs, err)
	}
	for _, e := range cs.all {
		errs = append(errs, e.Destroy())
	}
	errs = append(errs, cs.stream.Destroy())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dist: rank %d: closing the communication stream: %w", r.rank, err)
	}
	return nil
}
