package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// The side stream: work that may run beside the device's stream, which
// every other op is queued on. Its users are the overlapped optimizer
// step (AdamWStepsOverlapped, and AdamWStepsPipelined, which differs as
// adamw_pipeline.go says): the update of the parameters, group by
// group in model order, runs while the next forward pass starts on the
// device's stream, which waits, per group, only for the parameters it is
// about to read. The gradients stay allocated until their group has run;
// where memory is tight that costs more than the overlap hides (see
// nn.AdamW.Overlap), which is why it is asked for, never implied.
//
// Correctness rests on four orderings:
//
//   - the side stream waits for an event recorded on the device's stream
//     when the step is queued: it sees the clipped gradients, the moments'
//     first fill and any migration queued before;
//   - every parameter, first and second moment a group updates carries a
//     fence (storage.fence) on the event recorded after its group (for
//     moments that went through the pipelined update's copy ring, the
//     event after their write-back, cuda_ring.go): devPtr,
//     through which every op reaches device memory, makes the device's
//     stream wait for it at the first use, as does the storage's release
//     (the pool hands memory out on the device's stream);
//   - the gradients, which the step only reads and the caller releases
//     right after, are recorded as used on the side stream
//     (memory.Manager.RecordStream): the pool reuses their blocks only
//     once the side stream has passed the update;
//   - a migration of the placement scheduler first makes the copy's
//     stream wait for all the side stream's work (Manager's migrate
//     barrier), since parameters and moments are long-lived and carry no
//     RecordStream.
//
// Synchronize waits for every stream (the device's, the side stream, the
// copy stream and the copy ring's), and the backward pass starts only
// once the update's kernels are over (WaitOverlapped; the copy ring's last
// write-backs may run on into it): the overlap is with the forward pass. The update is bound by the bus when its moments live in
// host memory, and a kernel reading over the bus keeps it busy only while
// enough of its blocks are resident: the side stream is created at the
// greatest priority (cuda.PriorityHighest) and the device's stream one
// level under it, and the update runs in a small grid whose blocks stride
// over the rows of its table (sideGrid), so its blocks take an SM as soon
// as one frees and stay resident to the end, while the forward pass's
// kernels have the other SMs. (Until session 22 the side stream had the
// least priority and a block a row: its blocks waited for the forward's
// to finish and the bus idled meanwhile.) A group's event is
// recorded again by the next step: a fence never joined by then waits for
// the later record, which is later work on the same stream (waiting
// longer, never too little).

// sideFence is the side-stream work a storage waits for.
type sideFence struct {
	d  *cudaDevice
	ev *cuda.Event
	// on is the stream ev is recorded on: the side stream, the copy
	// stream (MoveTo) or the copy ring's write-back stream.
	on *cuda.Stream
	// host makes the first user wait on the host too, before its wait is
	// queued (AdamWStepsPipelined, adamw_pipeline.go): the host then
	// queues the next forward pass group by group behind the update, and
	// what it allocates meanwhile can reuse the gradients of the groups
	// already updated.
	host bool
	// trace is the group's record in the pipelined update's timeline
	// (cuda_pipeline_trace.go), nil when it is off.
	trace *pipeGroup
}

// joinFence makes the device's stream wait for the storage's fence, once.
// The wait is queued before the fence is cleared, so a concurrent user
// either sees the fence or finds the wait queued.
func (s *storage) joinFence() {
	f := s.fence.Load()
	if f == nil {
		return
	}
	if f.d.capturing() != nil {
		// CaptureGraph synchronized every stream before it began, and no
		// fence is made while a capture runs (the side stream, MoveTo and
		// the copy ring are refused): the fence's work is over. Waiting on
		// its event, recorded outside the capture, from the capturing
		// stream is invalid (CUDA's stream capture rules: a wait on a
		// non-captured event needs CU_EVENT_WAIT_EXTERNAL), so it is only
		// cleared.
		s.fence.CompareAndSwap(f, nil)
		return
	}
	if f.host {
		if err := f.ev.Synchronize(); err != nil {
			panic(&OpError{Op: "fence", Msg: fmt.Sprintf("waiting for %v's side stream", f.d), Err: err})
		}
	}
	if err := f.d.stream.WaitEvent(f.ev); err != nil {
		panic(&OpError{Op: "fence", Msg: fmt.Sprintf("ordering %v's stream after its side stream", f.d), Err: err})
	}
	if f.trace != nil {
		f.d.traceJoin(f.trace)
	}
	s.fence.CompareAndSwap(f, nil)
}

// cudaSide is a device's side stream and its events.
type cudaSide struct {
	once    sync.Once
	ready   atomic.Bool // made without error: Synchronize waits for it
	pending atomic.Bool // work queued since the last WaitOverlapped
	err     error
	stream  *cuda.Stream
	q       streamQueue
	memS    memory.Stream // stream as the pools know it
	start   *cuda.Event   // recorded on the device's stream, waited for by the side
	tail    *cuda.Event   // recorded on the side for migrations
	mu      sync.Mutex    // guards groups
	groups  []*cuda.Event // one a group of a step, reused every step
}

// sideStream returns the device's side stream, creating it on first use.
func (d *cudaDevice) sideStream(op string) *cudaSide {
	s := &d.side
	s.once.Do(func() {
		var err error
		if s.stream, err = d.ctx.NewStreamPriority(cuda.PriorityHighest); err != nil {
			s.err = err
			return
		}
		s.q = newStreamQueue(d, s.stream)
		if s.memS, err = d.streams.Stream(s.stream); err != nil {
			s.err = err
			return
		}
		for _, e := range []**cuda.Event{&s.start, &s.tail} {
			if *e, err = d.ctx.NewEvent(cuda.EventDisableTiming); err != nil {
				s.err = err
				return
			}
		}
		d.mem.SetMigrateBarrier(func(memory.Stream) error {
			if err := s.tail.Record(s.stream); err != nil {
				return err
			}
			if err := d.stream.WaitEvent(s.tail); err != nil {
				return err
			}
			return d.ringBarrier() // moments written back by the copy ring
		})
		s.ready.Store(true)
	})
	if s.err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("creating the side stream of %v", d), Err: s.err})
	}
	return s
}

// sideGrid is the grid of an update of n table rows on the side stream:
// at most width blocks, by default (width <= 0) a quarter of the device's
// SMs, a block of 256 threads each: the moments' reads over the bus need a
// few dozen resident blocks to keep it busy (more only wait longer for
// it), and the forward pass beside the update keeps the rest of the
// device. gpt2-medium's pipelined update under 4 GiB on the H200 (132 SMs,
// bench/results/hybrid-2026-12-03-s22.md) ran 0.479x of the unconstrained
// step at 33 blocks, 0.475x at 16, 0.470x at 66, 0.456x at 132 and 0.450x
// at a block a row.
func (d *cudaDevice) sideGrid(n, width int) int {
	if width <= 0 {
		width = max(1, d.props.Multiprocessors/4)
	}
	return balancedGrid(n, width)
}

// balancedGrid is the fewest blocks, at most width, that take n rows in
// as few rounds as width blocks would: every block then runs the same
// number of rows, or one fewer. A launch of width blocks would end on a
// round of the remainder alone (33 blocks over a GPT-2 medium block's 200
// rows: six rounds, then 2 blocks for a seventh, with the bus nearly
// idle), once a group of a pipelined update.
func balancedGrid(n, width int) int {
	if n <= width {
		return max(1, n)
	}
	return ceilDiv(n, ceilDiv(n, width))
}

// groupEvent is the event of group i, made on first use.
func (d *cudaDevice) groupEvent(op string, s *cudaSide, i int) *cuda.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.groups) <= i {
		e, err := d.ctx.NewEvent(cuda.EventDisableTiming)
		d.check(op, "creating a side-stream event", err)
		s.groups = append(s.groups, e)
	}
	return s.groups[i]
}

// WaitOverlapped blocks until the optimizer updates queued on dev's side
// stream (AdamWStepsOverlapped) have finished; at once when none is
// pending or dev has no side stream. autograd's backward pass calls it
// first: an update outlasting the forward pass would otherwise run beside
// the backward pass, holding the last step's gradients while the new ones
// are made (a device budget then spills). The host waits, not the device's
// stream, so that the pool sees the gradients' blocks free and reuses them.
// The copy ring's last write-backs of moments (cuda_ring.go), which
// nothing in backward reads, may still run; their fences order later uses.
func WaitOverlapped(dev Device) error {
	d, ok := dev.(*cudaDevice)
	if !ok || !d.side.pending.Swap(false) {
		return nil
	}
	if err := d.side.q.sync(); err != nil {
		return fmt.Errorf("tensor: waiting for %v's overlapped optimizer update: %w", d, err)
	}
	return nil
}

// syncSide waits for the side stream, when there is one.
func (d *cudaDevice) syncSide() error {
	if !d.side.ready.Load() {
		return nil
	}
	return d.side.q.sync()
}

// adamwOverlapped queues adamwMulti's update on the side stream in
// groups of about groupBytes of parameters, in the order given, and
// fences each group's parameters and moments (see the top of the file).
func (b cudaBackend) adamwOverlapped(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int, groupBytes int64) {
	const op = "AdamW"
	d := b.d
	s := d.startSide(op)
	for g, lo := 0, 0; lo < len(ps); g++ {
		hi, n := lo, int64(0)
		for hi < len(ps) && (hi == lo || n < groupBytes) {
			n += ps[hi].Bytes()
			hi++
		}
		// The rows' raw addresses join no fence: a tensor moved by MoveTo
		// (or a moment written back by the pipelined update's copy ring)
		// carries a fence on another stream, which the side stream must
		// wait for before it reads or writes the tensor, as the pipelined
		// update does.
		d.sideAfterFences(op, s, nil, ps[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi])
		d.adamwTable(s, ps[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi], wd[lo:hi], lr, beta1, beta2, eps, step, rawPtr)
		d.fenceGroup(op, s, g, false, nil, ps[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi])
		lo = hi
	}
}

// startSide returns d's side stream, ordered after the work queued so far
// on the device's stream (the backward pass, the gradients' clipping, the
// moments' first fill), and marks an update pending (WaitOverlapped).
func (d *cudaDevice) startSide(op string) *cudaSide {
	d.refuseInCapture(op, "queuing work on the side stream (an overlapped or pipelined update)")
	s := d.sideStream(op)
	d.mu.Lock()
	err := s.start.Record(d.stream)
	if err == nil {
		err = s.stream.WaitEvent(s.start)
	}
	d.mu.Unlock()
	d.check(op, "ordering the side stream after the device's", err)
	s.pending.Store(true)
	return s
}

// fenceGroup records group g's event on side stream s after the group's
// update, fences the parameters ps and moments ms and vs on it (host: the
// first user waits on the host too, see sideFence) and records the
// gradients gs' use on s, so that their blocks return to the pool once
// the group has run.
func (d *cudaDevice) fenceGroup(op string, s *cudaSide, g int, host bool, trace *pipeGroup, ps, gs, ms, vs []*Tensor) {
	ev := d.groupEvent(op, s, g)
	d.check(op, "recording a side-stream event", ev.Record(s.stream))
	fence := &sideFence{d: d, ev: ev, on: s.stream, host: host, trace: trace}
	for i := range ps {
		for _, t := range [...]*Tensor{ps[i], ms[i], vs[i]} {
			t.ref.st.fence.Store(fence)
		}
		if err := d.mem.RecordStream(gs[i].ref.st.alloc, s.memS); err != nil {
			panic(&OpError{Op: op, Msg: "recording a gradient's use on the side stream", Err: err})
		}
	}
}
