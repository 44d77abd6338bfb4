package dist

import (
	"fmt"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Overlap: each bucket's all-reduce starts as soon as backward has made
// the bucket's last gradient, while backward computes the others (see
// the package documentation, "Overlap").

// AsyncCollective is a Collective that can start an all-reduce and
// return before it is done: the NCCL group's ranks, whose all-reduce is
// queued on a communication stream of their own, and the local group's,
// which run it on a goroutine after the calls started before it.
// DataParallel reduces its buckets through it during backward; a
// Collective without it (a test's) has its AllReduceSum called on a
// goroutine per bucket instead, each after the one before.
type AsyncCollective interface {
	Collective
	// StartAllReduceSum starts AllReduceSum(t) and returns without
	// waiting for it, with the wait that ends it: until wait has
	// returned, t must be neither read nor written, and every rank must
	// make its calls in the same order as for AllReduceSum. wait returns
	// the call's error, if any, and is called once. An error from
	// StartAllReduceSum itself means nothing was started; either error
	// fails the group.
	StartAllReduceSum(t *tensor.Tensor) (wait func() error, err error)
}

// overlap is a DataParallel's state between two SyncGradients: which
// parameters backward has finished, which buckets were started.
type overlap struct {
	d       *DataParallel
	hooked  []*autograd.Var // the parameters given hooks, to remove them
	ready   []bool          // per parameter (flag index): its gradient is final
	left    []int           // per bucket: parameters not ready yet
	next    int             // the next bucket to start: buckets start in order
	present []float32       // the presence flags of the started buckets
	waits   []func() error
	err     error // the first failure since the last SyncGradients
	noSync  bool  // in NoSync: the hooks do nothing
	early   int   // buckets started by the hooks since the last SyncGradients
	inPass  int   // early at the last SyncGradients (OverlappedBuckets)

	// Without AsyncCollective: bucket i's AllReduceSum runs on a goroutine
	// that first waits for bucket i-1's (tail, closed when the last one
	// started is done) and leaves its error in errs[i].
	tail chan struct{}
	errs []error
	// onStart, for tests, is called as bucket i is started.
	onStart func(i int)
	// The gradient each parameter had when its bucket was copied, and
	// its storage's version then: SyncGradients refuses a gradient
	// changed since (the copy sent would not be it).
	sent    []*tensor.Tensor
	sentVer []uint64
}

// startOverlap gives every bucketed parameter a gradient hook.
func (d *DataParallel) startOverlap() error {
	ov := &overlap{d: d, ready: make([]bool, d.nflags), left: make([]int, len(d.buckets)),
		present: make([]float32, d.nflags), errs: make([]error, len(d.buckets)),
		sent: make([]*tensor.Tensor, d.nflags), sentVer: make([]uint64, d.nflags)}
	for i, b := range d.buckets {
		for _, p := range b.Params {
			var err error
			switch {
			case !p.IsLeaf(): // SetGradHook would panic: only a leaf's gradient is kept and reported
				err = fmt.Errorf("dist: New: parameter %q is not a leaf of the graph (an op's result): its gradient is neither kept nor reported by backward: %w", p.Name, tensor.ErrArgument)
			case p.HasGradHook():
				err = fmt.Errorf("dist: New: parameter %q has a gradient hook already (in another DataParallel?); use NoOverlap, or Release the other: %w", p.Name, tensor.ErrArgument)
			}
			if err != nil {
				for _, v := range ov.hooked {
					v.SetGradHook(nil)
				}
				return err
			}
		}
		ov.left[i] = len(b.Params)
		for j, p := range b.Params {
			i, j := i, j
			p.SetGradHook(func(*autograd.Var) { ov.gradReady(i, j) })
			ov.hooked = append(ov.hooked, p.Var)
		}
	}
	d.ov = ov
	return nil
}

// stopOverlap waits for what is in flight and removes the hooks.
func (d *DataParallel) stopOverlap() {
	ov := d.ov
	if ov == nil {
		return
	}
	ov.drain()
	for _, v := range ov.hooked {
		v.SetGradHook(nil)
	}
	d.ov = nil
}

// NoSync runs fn, the forward and backward passes of micro-batches whose
// gradients accumulate into those of a later one, without starting any
// all-reduce (PyTorch DDP's no_sync): with the overlap on, a backward
// pass outside NoSync starts reducing the buckets, so a second backward
// pass before SyncGradients would change gradients already sent, which
// SyncGradients reports as an error. Run every micro-batch but the last
// in NoSync, then the last's backward, then SyncGradients. Without the
// overlap (Options.NoOverlap) it just runs fn. It returns fn's error.
func (d *DataParallel) NoSync(fn func() error) error {
	ov := d.ov
	if ov == nil {
		return fn()
	}
	// ov, not d.ov: fn may Release d (on its error path), which drops
	// d.ov, and restoring the flag must not then dereference nil.
	old := ov.noSync
	ov.noSync = true
	defer func() { ov.noSync = old }()
	return fn()
}

// gradReady is parameter j of bucket i's hook: its gradient is final for
// this backward pass. Buckets all of whose gradients are final are
// started in order: bucket i only after bucket i-1, so every rank starts
// them in the same order whatever order backward finished them in.
func (ov *overlap) gradReady(i, j int) {
	if ov.err != nil {
		return
	}
	if i < ov.next { // started: in NoSync too, this pass changed what was sent
		p := ov.d.buckets[i].Params[j]
		ov.err = fmt.Errorf("dist: the gradient of %q changed after its bucket's all-reduce had started: a second backward pass before SyncGradients (for gradient accumulation, run all micro-batches but the last in DataParallel.NoSync): %w", p.Name, tensor.ErrArgument)
		return
	}
	k := ov.d.first[i] + j
	if ov.noSync || ov.ready[k] {
		return // NoSync, or a second pass before its bucket started: read at the start
	}
	ov.ready[k] = true
	if ov.left[i]--; ov.left[i] > 0 || i != ov.next {
		return
	}
	for ov.next < len(ov.left) && ov.left[ov.next] == 0 && ov.err == nil {
		ov.start(ov.next)
		ov.next++
		ov.early++
	}
}

// start copies bucket i's gradients into its buffer and starts its
// all-reduce. A failure is kept for SyncGradients and fails the group
// now, so that no rank waits for this one.
func (ov *overlap) start(i int) {
	d := ov.d
	if ov.onStart != nil {
		ov.onStart(i)
	}
	err := d.checkBucket(i)
	if err == nil {
		err = d.fill(i, ov.present)
	}
	if err == nil {
		for j, p := range d.buckets[i].Params {
			k := d.first[i] + j
			ov.sent[k], ov.sentVer[k] = p.Grad, 0
			if p.Grad != nil {
				ov.sentVer[k] = p.Grad.Version()
			}
		}
		if ac, ok := d.coll.(AsyncCollective); ok {
			var wait func() error
			if wait, err = ac.StartAllReduceSum(d.bufs[i]); err == nil {
				ov.waits = append(ov.waits, wait)
			}
		} else {
			prev, done, buf := ov.tail, make(chan struct{}), d.bufs[i]
			ov.tail = done
			go func() {
				defer close(done)
				if prev != nil {
					<-prev
				}
				ov.errs[i] = d.coll.AllReduceSum(buf)
			}()
		}
	}
	if err != nil {
		ov.err = err
		d.coll.Abort(err)
	}
}

// drain waits for every all-reduce started and returns the first error
// since the last SyncGradients; the state is reset for the next pass.
func (ov *overlap) drain() error {
	err := ov.err
	for _, w := range ov.waits {
		if werr := w(); werr != nil && err == nil {
			err = werr
		}
	}
	if ov.tail != nil {
		<-ov.tail // every goroutine before it is done too
	}
	for i, e := range ov.errs {
		if e != nil && err == nil {
			err = e
		}
		ov.errs[i] = nil
	}
	ov.waits, ov.tail, ov.err, ov.next = ov.waits[:0], nil, nil, 0
	ov.inPass, ov.early = ov.early, 0
	clear(ov.ready)
	for i, b := range ov.d.buckets {
		ov.left[i] = len(b.Params)
	}
	return err
}

// syncOverlapped is SyncGradients with the overlap: the buckets backward
// did not finish (parameters it did not reach, or a backward pass in
// NoSync) are started now, in order; then every all-reduce is waited
// for (with NCCL: the device's stream waits for the communication
// stream's events, the host does not wait) and finish scales and copies
// back as without the overlap.
func (d *DataParallel) syncOverlapped() error {
	ov := d.ov
	for ov.next < len(d.buckets) && ov.err == nil {
		ov.start(ov.next)
		ov.next++
	}
	if err := ov.drain(); err != nil {
		return err
	}
	if err := ov.checkSent(); err != nil {
		return err
	}
	return d.finish(ov.present)
}

// OverlappedBuckets is the number of buckets whose all-reduce the last
// SyncGradients found started during backward (the others it started
// itself): len(Buckets()) when every parameter's gradient was made by
// the last backward pass outside NoSync; 0 with Options.NoOverlap.
func (d *DataParallel) OverlappedBuckets() int {
	if d.ov == nil {
		return 0
	}
	return d.ov.inPass
}

// checkSent refuses a gradient replaced or written in place since its
// bucket was copied (between backward and SyncGradients): the mean sent
// would silently overwrite the change, where NoOverlap includes it.
func (ov *overlap) checkSent() error {
	defer clear(ov.sent)
	for i, b := range ov.d.buckets {
		for j, p := range b.Params {
			k := ov.d.first[i] + j
			if p.Grad != ov.sent[k] || p.Grad != nil && p.Grad.Version() != ov.sentVer[k] {
				return fmt.Errorf("dist: SyncGradients: the gradient of %q changed after backward had handed its bucket to the all-reduce (with the overlap, change gradients only after SyncGradients, or use Options.NoOverlap): %w", p.Name, tensor.ErrArgument)
			}
		}
	}
	return nil
}
