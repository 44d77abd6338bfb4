package dist

import (
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// Options configures DataParallel. The zero value is ready to use.
type Options struct {
	// BucketBytes is the gradient bucket size (AssignBuckets); 0 (or a
	// negative size) means DefaultBucketBytes (25 MiB). Every rank must
	// use the same.
	BucketBytes int64
	// NoOverlap turns off the overlap of the buckets' all-reduces with
	// backward (overlap.go): SyncGradients then copies and reduces every
	// bucket after backward, one after the other, on the caller's
	// goroutine and the device's stream. The result is the same bits.
	NoOverlap bool
}

// DataParallel is one rank's side of data-parallel training: every rank
// holds a replica of the model, runs forward and backward on its own part
// of the global batch, and SyncGradients replaces each gradient by its
// mean over the ranks, so that the optimizer, run on every rank, makes
// the same update everywhere. Gradients are reduced in buckets
// (AssignBuckets), each through one flat buffer, one collective call per
// bucket, started while backward still runs (gradient hooks on the
// parameters; see the package documentation, "Overlap"). It is used by
// one goroutine, the rank's; each rank builds its own with its own
// Collective and parameters, all in the same order.
type DataParallel struct {
	coll    Collective
	params  []*nn.Parameter
	buckets []Bucket
	bufs    []*tensor.Tensor // one flat buffer per bucket, kept
	flags   *tensor.Tensor   // one presence count per bucketed parameter, then every rank's signature (Size·sigLen), kept
	nflags  int
	first   []int           // bucket i's first parameter's index among the flags
	bytes   int64           // the bucket size (bucketSize of Options.BucketBytes)
	ctx     *tensor.Ctx     // the rank's temporaries (uploads)
	ov      *overlap        // the buckets' reduction during backward; nil with NoOverlap
	sig     [sigLen]float32 // this rank's parameters' signature (sign)
	frozen  []*nn.Parameter // the parameters New left out of the buckets
}

// New returns rank coll.Rank()'s DataParallel over params (a model's
// Parameters, in registration order: the same on every rank). It
// allocates the buckets' buffers (role gradient) on the device of each
// bucket's first parameter and, unless opts.NoOverlap, sets a gradient
// hook (autograd.Var.SetGradHook) on every bucketed parameter, which
// Release removes. Errors: a nil collective or parameter, a collective
// whose Rank is not in [0, Size), a parameter given twice, a parameter
// that has a gradient hook already (another DataParallel's) or, with the
// overlap, is not a leaf (an op's result), or the memory error. New makes no collective call: the ranks' parameters are
// compared by BroadcastParameters and SyncGradients.
func New(coll Collective, params []*nn.Parameter, opts Options) (*DataParallel, error) {
	if err := checkCollective("New", coll); err != nil {
		return nil, err
	}
	if err := nn.Distinct(params); err != nil { // a nil parameter too, naming its index
		return nil, fmt.Errorf("dist: New: %w", err)
	}
	bytes := bucketSize(opts.BucketBytes)
	d := &DataParallel{coll: coll, params: params, buckets: AssignBuckets(params, bytes),
		bytes: bytes, ctx: tensor.NewCtx()}
	d.sig = sign(params, true, fmt.Sprintf("bucket bytes %d", bytes))
	for _, p := range params {
		if !p.RequiresGrad() {
			d.frozen = append(d.frozen, p)
		}
	}
	for _, b := range d.buckets {
		buf, err := tensor.NewKept(b.Params[0].Value.Device(), b.DType, memory.RoleGradient, b.Numel)
		if err != nil {
			d.Release()
			return nil, err
		}
		buf.SetLabel(fmt.Sprintf("dist.bucket:%s..%s", b.Params[0].Name, b.Params[len(b.Params)-1].Name))
		d.bufs = append(d.bufs, buf)
		d.first = append(d.first, d.nflags)
		d.nflags += len(b.Params)
	}
	// The flags exist without a bucket too: SyncGradients all-reduces
	// them on every rank, so that a rank with nothing to reduce still
	// meets the others (and finds that their parameters differ).
	dev := d.device()
	if d.nflags > 0 {
		dev = d.buckets[0].Params[0].Value.Device()
	}
	f, err := tensor.NewKept(dev, tensor.Float32, memory.RoleGradient, d.nflags+coll.Size()*sigLen)
	if err != nil {
		d.Release()
		return nil, err
	}
	d.flags = f
	if !opts.NoOverlap && d.nflags > 0 {
		if err := d.startOverlap(); err != nil {
			d.Release()
			return nil, err
		}
	}
	return d, nil
}

// Collective is the group d reduces over.
func (d *DataParallel) Collective() Collective { return d.coll }

// Buckets is the bucket assignment, in the order SyncGradients reduces
// the buckets.
func (d *DataParallel) Buckets() []Bucket { return d.buckets }

// Abort fails the group (Collective.Abort): a rank whose step fails
// calls it so that the other ranks' collective calls return an error
// instead of waiting for it.
func (d *DataParallel) Abort(err error) { d.coll.Abort(err) }

// Release waits for the all-reduces in flight, removes the gradient
// hooks and frees the buffers.
func (d *DataParallel) Release() {
	d.stopOverlap()
	for _, b := range d.bufs {
		b.Release()
	}
	d.bufs = nil
	if d.flags != nil {
		d.flags.Release()
		d.flags = nil
	}
}

// SyncGradients averages the gradients over the ranks: call it on every
// rank after backward and before gradient clipping and the optimizer.
// For each bucket, in order, it copies the gradients into the bucket's
// flat buffer, all-reduces it (one AllReduceSum), and after the last
// bucket divides by the number of ranks and copies the means back into
// the gradients. A parameter without a gradient on some rank contributes
// zeros, so every rank makes the same calls; a count of the ranks that
// had a gradient, all-reduced with one more call, decides afterwards:
// a parameter that no rank gave a gradient keeps none (as in a
// single-process run, the optimizer skips it), any other gets the mean
// on every rank (allocated, role gradient, in the parameter's gradient
// dtype (autograd.Var.SetGradDType), where it had none). The same call
// carries every rank's signature of its parameters (their number, names,
// dtypes, shapes and order, which are trainable and their gradient
// dtypes, as New found them, and the bucket size), compared before
// anything is copied back: ranks whose parameters differ get an error
// wrapping ErrMismatch on every rank, their gradients as they were. A DataParallel without a trainable
// parameter makes that call too. A parameter frozen when New assigned the
// buckets, and so in none, that has a gradient (unfrozen since) is an
// error wrapping tensor.ErrArgument naming it: its gradient would not be
// averaged. Like every error of SyncGradients it aborts the group, so
// unfreeze parameters before New (or continue in a new group). A
// gradient whose shape is not its parameter's (wrapping tensor.ErrShape)
// or that is not contiguous (a view, which the mean cannot be copied back
// into; wrapping tensor.ErrArgument) is refused too, naming the
// parameter, before SyncGradients makes any call.
//
// With the overlap (the default; Options.NoOverlap turns it off) most
// of that has happened during backward: each bucket was copied and its
// all-reduce started as soon as backward had made its last gradient
// (overlap.go). SyncGradients then starts the buckets backward did not
// complete (parameters it did not reach), in order, waits for every
// all-reduce (with NCCL the device's stream waits for the communication
// stream; the host does not), and scales and copies back as above: the
// same calls in the same order, and the same bits. A second backward
// pass after buckets were started and before SyncGradients is an error
// (it would change gradients already sent): accumulate micro-batches
// inside NoSync. So is a gradient written or replaced between backward
// and SyncGradients (an unscale or a clip before the sync): change
// gradients after SyncGradients, or use Options.NoOverlap, which averages
// them as they are then.
//
// On an error (the collective's, or an op's panic while copying) the
// group is aborted, so the other ranks get an error too, and the
// gradients are left unspecified.
func (d *DataParallel) SyncGradients() error {
	err := d.syncGradients()
	if err != nil {
		d.coll.Abort(err)
	}
	return err
}

func (d *DataParallel) syncGradients() error {
	if d.flags == nil {
		return fmt.Errorf("dist: SyncGradients after Release: %w", tensor.ErrArgument)
	}
	if err := d.checkGrads(); err != nil {
		if d.ov != nil {
			_ = d.ov.drain() // the buckets backward started; err is the one to report
		}
		return err
	}
	if d.ov != nil {
		return d.syncOverlapped()
	}
	present := make([]float32, d.nflags)
	for i := range d.buckets {
		if err := d.fill(i, present); err != nil {
			return err
		}
		if err := d.coll.AllReduceSum(d.bufs[i]); err != nil {
			return err
		}
	}
	return d.finish(present)
}

// checkGrads refuses, before SyncGradients makes any call, a gradient it
// would not average: one of a parameter frozen when New assigned the
// buckets, and one checkBucket refuses (the hooks check each bucket's as
// they start it): such a gradient would otherwise fail every rank only
// after the all-reduces, and unnamed.
func (d *DataParallel) checkGrads() error {
	for _, p := range d.frozen {
		if p.Grad != nil && p.RequiresGrad() {
			return fmt.Errorf("dist: SyncGradients: parameter %q has a gradient but was frozen when New assigned the buckets, so it is in none: its gradient would not be averaged and the ranks' replicas would drift apart; unfreeze parameters before dist.New (this error aborts the group: continuing needs a new one): %w", p.Name, tensor.ErrArgument)
		}
	}
	for i := range d.buckets {
		if err := d.checkBucket(i); err != nil {
			return err
		}
	}
	return nil
}

// checkBucket is checkGrad on bucket i's parameters.
func (d *DataParallel) checkBucket(i int) error {
	for _, p := range d.buckets[i].Params {
		if err := checkGrad(p); err != nil {
			return err
		}
	}
	return nil
}

// fill copies bucket i's gradients, checked (checkBucket), into its flat
// buffer (zeros for a parameter without one) and sets their presence
// flags (1 where the parameter has a gradient) in present.
func (d *DataParallel) fill(i int, present []float32) error {
	b, buf := d.buckets[i], d.bufs[i]
	return tensor.Try(func() {
		for j, p := range b.Params {
			seg := segment(buf, b.Offsets[j], p.Value.Shape())
			if p.Grad != nil {
				seg.CopyFrom(p.Grad)
				present[d.first[i]+j] = 1
			} else {
				seg.Fill(0)
				present[d.first[i]+j] = 0
			}
			seg.Release()
		}
	})
}

// checkGrad refuses a gradient of p that SyncGradients cannot average:
// one whose shape is not its value's, or one that is not contiguous (a
// view set by the program), which the mean cannot be copied back into.
func checkGrad(p *nn.Parameter) error {
	switch {
	case p.Grad == nil:
	case !slices.Equal(p.Grad.Shape(), p.Value.Shape()):
		return fmt.Errorf("dist: SyncGradients: parameter %q has a gradient of shape %v, its value %v: %w", p.Name, p.Grad.Shape(), p.Value.Shape(), tensor.ErrShape)
	case !p.Grad.IsContiguous():
		return fmt.Errorf("dist: SyncGradients: parameter %q has a gradient that is not contiguous (a view): the mean cannot be copied back into it: %w", p.Name, tensor.ErrArgument)
	}
	return nil
}

// finish is SyncGradients once every bucket is reduced: the presence
// counts and the ranks' signatures all-reduced, the signatures compared
// (ranks whose parameters differ may have made calls of the same sizes
// on different data: nothing is copied back then), the means copied
// back into the gradients.
func (d *DataParallel) finish(present []float32) error {
	vals := make([]float32, d.flags.Numel())
	copy(vals, present)
	copy(vals[d.nflags+d.coll.Rank()*sigLen:], d.sig[:])
	if err := tensor.Try(func() {
		d.ctx.WithScope(func() { d.flags.CopyFrom(d.ctx.FromFloat32s(d.flags.Device(), vals, len(vals))) })
	}); err != nil {
		return err
	}
	if err := d.coll.AllReduceSum(d.flags); err != nil {
		return err
	}
	var counts []float32
	if err := tensor.Try(func() { counts = d.flags.Float32s() }); err != nil {
		return err
	}
	if err := checkSigns("SyncGradients", "parameters", dpSigned, counts[d.nflags:], d.coll.Size()); err != nil {
		return err
	}
	k := 0
	inv := 1 / float64(d.coll.Size())
	for i, b := range d.buckets {
		buf := d.bufs[i]
		for _, p := range b.Params {
			used := counts[k] > 0
			k++
			if !used {
				continue
			}
			if p.Grad == nil {
				g, err := tensor.NewKept(p.Value.Device(), p.GradDType(), memory.RoleGradient, p.Value.Shape()...)
				if err != nil {
					return err
				}
				p.Grad = g
			}
		}
		if err := tensor.Try(func() {
			buf.ScaleInPlace(inv)
			for j, p := range b.Params {
				if p.Grad == nil {
					continue
				}
				seg := segment(buf, b.Offsets[j], p.Value.Shape())
				p.Grad.CopyFrom(seg)
				seg.Release()
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// segment is the view of buf's elements [off, off+numel(shape)) with
// shape.
func segment(buf *tensor.Tensor, off int, shape []int) *tensor.Tensor {
	n := 1
	for _, s := range shape {
		n *= s
	}
	nar := buf.Narrow(0, off, n)
	seg := nar.Reshape(shape...)
	nar.Release()
	return seg
}

// BroadcastParameters makes every rank's parameters (all of them, frozen
// ones too) equal to rank 0's, bit for bit: call it on every rank once,
// before training, so the replicas start identical whatever their
// initialisation. It packs the values into buckets as SyncGradients does
// (temporary buffers), rank 0 its values and the others zeros, and
// all-reduces each bucket: the sum is rank 0's values exactly (x + 0 = x;
// only a -0 becomes +0, on every rank alike). An AllGather would do as
// well; the all-reduce needs no buffer Size times larger. It first
// compares the ranks' signatures of their parameters (one more small
// all-reduce; see SyncGradients): ranks whose parameters differ get an
// error wrapping ErrMismatch on every rank, with nothing changed. A
// parameter whose value is not contiguous (a view), which rank 0's
// values cannot be copied into, is an error wrapping tensor.ErrArgument
// naming it, before any call. Errors as SyncGradients (the group is
// aborted).
func (d *DataParallel) BroadcastParameters() error {
	err := d.broadcast()
	if err != nil {
		d.coll.Abort(err)
	}
	return err
}

func (d *DataParallel) broadcast() error {
	// Refused before any call: found while copying back, it would fail
	// every rank after the buckets before its own had been overwritten.
	for _, p := range d.params {
		if !p.Value.IsContiguous() {
			return fmt.Errorf("dist: BroadcastParameters: parameter %q is not contiguous (a view): rank 0's values cannot be copied into it: %w", p.Name, tensor.ErrArgument)
		}
	}
	if err := agree(d.coll, d.ctx, d.device(), "BroadcastParameters", "parameters", dpSigned, d.sig); err != nil {
		return err
	}
	bs := assignBuckets(d.params, d.bytes, true) // frozen parameters too
	root := d.coll.Rank() == 0
	for _, b := range bs {
		buf, err := tensor.NewKept(b.Params[0].Value.Device(), b.DType, memory.RoleOther, b.Numel)
		if err != nil {
			return err
		}
		err = tensor.Try(func() {
			if !root {
				buf.Fill(0)
				return
			}
			for j, p := range b.Params {
				seg := segment(buf, b.Offsets[j], p.Value.Shape())
				seg.CopyFrom(p.Value)
				seg.Release()
			}
		})
		if err == nil {
			err = d.coll.AllReduceSum(buf)
		}
		if err == nil {
			err = tensor.Try(func() {
				for j, p := range b.Params {
					seg := segment(buf, b.Offsets[j], p.Value.Shape())
					p.Value.CopyFrom(seg)
					seg.Release()
				}
			})
		}
		buf.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// AllReduceMean returns the mean of v over the ranks (summed in rank
// order in float64 by the local group): for logging the global batch's
// loss, the mean of the ranks' losses when their batches hold the same
// number of tokens. An error aborts the group. It uses the group's
// Collective, which serves one call at a time: with overlap on, call it
// after SyncGradients has returned, not while buckets of the backward
// pass may still be in flight.
func (d *DataParallel) AllReduceMean(v float64) (float64, error) {
	var sum float64
	var err error
	if ov := d.ov; ov != nil && ov.next > 0 {
		err = fmt.Errorf("dist: AllReduceMean: %d gradient buckets of the last backward pass are still being all-reduced through the same Collective: call AllReduceMean after SyncGradients: %w", ov.next, tensor.ErrArgument)
		d.coll.Abort(err)
		return 0, err
	}
	if perr := tensor.Try(func() {
		d.ctx.WithScope(func() {
			t := d.ctx.FromFloat64s(d.device(), []float64{v}, 1)
			if err = d.coll.AllReduceSum(t); err == nil {
				sum = t.Item()
			}
		})
	}); perr != nil {
		err = perr
	}
	if err != nil {
		d.coll.Abort(err)
		return 0, err
	}
	return sum / float64(d.coll.Size()), nil
}

// device is where d's small temporaries go: the first parameter's device.
func (d *DataParallel) device() tensor.Device {
	if len(d.params) > 0 {
		return d.params[0].Value.Device()
	}
	return tensor.CPU()
}

// checkCollective refuses a nil Collective, or one whose Size and Rank
// are not a group's (a Collective implemented outside the package).
func checkCollective(op string, coll Collective) error {
	if coll == nil {
		return fmt.Errorf("dist: %s: nil Collective: %w", op, tensor.ErrArgument)
	}
	if size, rank := coll.Size(), coll.Rank(); size < 1 || rank < 0 || rank >= size {
		return fmt.Errorf("dist: %s: the Collective is rank %d of %d: want 0 <= Rank < Size: %w", op, rank, size, tensor.ErrArgument)
	}
	return nil
}

// What the ranks' parameters must agree on: every rank's call compares
// a signature of its parameters with the others'. In one process the
// collective compares the calls' sizes and dtypes; ranks whose
// parameters differ in shape or order but not in size would make calls
// that match, each bucket then summing unrelated gradients, silently.

// sigLen is the number of float32 elements of a rank's signature.
const sigLen = 5

// dpSigned is what a DataParallel's signature covers.
const dpSigned = "names, dtypes, shapes, order, which are trainable, gradient dtypes (SetGradDType), or Options.BucketBytes"

// sign is the signature of ps: their number, and a 64-bit FNV-1a hash
// of their names, dtypes and shapes, of whether each is trainable and
// its gradient dtype (when trainable is true: ranks whose means are
// rounded to different dtypes would drift apart) and of extra, in four 16-bit pieces: every element
// an integer below 2^24, exact in float32 and in a sum with zeros, as
// rank r's slots are in the all-reduce that hands every rank every
// rank's (agree, and SyncGradients' presence counts).
func sign(ps []*nn.Parameter, trainable bool, extra string) [sigLen]float32 {
	h := fnv.New64a()
	for _, p := range ps {
		fmt.Fprintf(h, "%q %v %v", p.Name, p.Value.DType(), p.Value.Shape())
		if trainable {
			fmt.Fprintf(h, " %v %v", p.RequiresGrad(), p.GradDType())
		}
		h.Write([]byte{0})
	}
	h.Write([]byte(extra))
	x := h.Sum64()
	return [sigLen]float32{float32(len(ps)), float32(x >> 48), float32(x >> 32 & 0xffff), float32(x >> 16 & 0xffff), float32(x & 0xffff)}
}

// agree all-reduces the ranks' signatures (rank r's in elements
// [r·sigLen, (r+1)·sigLen), zeros elsewhere: the sum is every rank's,
// exactly), on dev, and compares them (checkSigns).
func agree(coll Collective, c *tensor.Ctx, dev tensor.Device, op, noun, what string, s [sigLen]float32) error {
	size := coll.Size()
	vals := make([]float32, size*sigLen)
	copy(vals[coll.Rank()*sigLen:], s[:])
	var err error
	if perr := tensor.Try(func() {
		c.WithScope(func() {
			t := c.FromFloat32s(dev, vals, len(vals))
			if err = coll.AllReduceSum(t); err == nil {
				vals = t.Float32s()
			}
		})
	}); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	return checkSigns(op, noun, what, vals, size)
}

// checkSigns compares every rank's signature in all (sigLen elements a
// rank) with rank 0's: every rank sees the same all, so every rank
// returns the same error, wrapping ErrMismatch, naming the first rank
// that differs.
func checkSigns(op, noun, what string, all []float32, size int) error {
	ref := all[:sigLen]
	for r := 1; r < size; r++ {
		s := all[r*sigLen : (r+1)*sigLen]
		if slices.Equal(ref, s) {
			continue
		}
		if ref[0] != s[0] {
			return fmt.Errorf("dist: %s: rank 0 has %d %s, rank %d has %d: every rank needs the same, in the same order: %w", op, int(ref[0]), noun, r, int(s[0]), ErrMismatch)
		}
		return fmt.Errorf("dist: %s: rank 0's %d %s differ from rank %d's in their %s: every rank needs the same, in the same order: %w", op, int(ref[0]), noun, r, what, ErrMismatch)
	}
	return nil
}
