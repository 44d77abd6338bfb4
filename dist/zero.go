package dist

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// ZeroAdamW is nn.AdamW with its state sharded over the ranks (ZeRO stage
// 1): the trainable parameters, in registration order, are laid end to
// end in one flat space of n elements, padded to Size·k, and rank r owns
// elements [r·k, (r+1)·k). Each rank keeps the moments of its shard only
// (2k elements instead of 2n), updates its shard with AdamW's rule
// (tensor.AdamWStep, on the part of each parameter that falls in the
// shard, with that parameter's weight decay), and one AllGather of the
// flat parameters gives every rank the whole update. AdamW is
// element-wise, so the result is the unsharded AdamW's, bit for bit.
//
// It implements nn.Optimizer. Call Step on every rank after
// DataParallel.SyncGradients (and clipping): it needs every rank's
// gradients equal, and skips, as nn.AdamW does, the parameters without a
// gradient (after SyncGradients the same ones on every rank) and those
// frozen since NewZeroAdamW; as there,
// each parameter's bias correction counts its own updates. The
// trainable parameters must be distinct and contiguous and share one
// float dtype and device. Besides the moments it holds two flat buffers
// of Size·k elements (parameters and gradients); the gradient one could
// shrink to k with a ReduceScatterSum in place of SyncGradients'
// all-reduce (ZeRO stage 2), which the clipping's global norm would then
// need one more all-reduce for.
type ZeroAdamW struct {
	LR, Beta1, Beta2, Eps float64
	WeightDecay           float64

	coll         Collective
	params       []*nn.Parameter // trainable, registration order
	offs         []int           // each one's first element in the flat space
	n, k         int             // elements, elements per rank
	flatP, flatG *tensor.Tensor  // Size·k each, kept
	m, v         *tensor.Tensor  // k each: this rank's shard of the moments
	step         int             // Step calls
	steps        []int           // updates of each parameter: its bias correction, as nn.AdamW
	agreed       bool            // the ranks' signatures were found equal (the first Step)
	ctx          *tensor.Ctx     // the rank's temporaries
	frozen       []*nn.Parameter // the parameters left out, frozen at NewZeroAdamW
}

// NewZeroAdamW returns rank coll.Rank()'s sharded AdamW over params with
// PyTorch's defaults for the betas and eps (as nn.NewAdamW). Errors: a
// nil collective (or one whose Rank is not in [0, Size)), a nil
// parameter, a parameter given twice, a trainable parameter whose value
// is not contiguous (Step writes the update back through a flat view of
// it), parameters of different dtypes or devices, no trainable
// parameter (or none with an element), a learning rate or weight decay that nn.AdamW's Step would
// refuse (NaN, infinite or negative), or the memory error.
func NewZeroAdamW(coll Collective, params []*nn.Parameter, lr, weightDecay float64) (*ZeroAdamW, error) {
	if err := checkCollective("NewZeroAdamW", coll); err != nil {
		return nil, err
	}
	o := &ZeroAdamW{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay, coll: coll}
	if err := o.checkSettings("NewZeroAdamW"); err != nil {
		return nil, err
	}
	if i := firstNil(params); i >= 0 {
		return nil, fmt.Errorf("dist: NewZeroAdamW: parameter %d is nil: %w", i, tensor.ErrArgument)
	}
	var trainable []*nn.Parameter
	for _, p := range params {
		if p.RequiresGrad() {
			trainable = append(trainable, p)
		} else {
			o.frozen = append(o.frozen, p)
		}
	}
	if err := nn.Distinct(trainable); err != nil {
		return nil, fmt.Errorf("dist: NewZeroAdamW: %w", err)
	}
	for _, p := range trainable {
		if !p.Value.IsContiguous() {
			return nil, fmt.Errorf("dist: NewZeroAdamW: parameter %q is not contiguous (a view): its update would go to a copy: %w", p.Name, tensor.ErrArgument)
		}
		if q := o.params; len(q) > 0 && (p.Value.DType() != q[0].Value.DType() || p.Value.Device() != q[0].Value.Device()) {
			return nil, fmt.Errorf("dist: NewZeroAdamW: %q is %v on %v, %q %v on %v: want one dtype and device: %w",
				q[0].Name, q[0].Value.DType(), q[0].Value.Device(), p.Name, p.Value.DType(), p.Value.Device(), tensor.ErrArgument)
		}
		o.params = append(o.params, p)
		o.offs = append(o.offs, o.n)
		o.n += p.Value.Numel()
	}
	if o.n == 0 && len(o.params) > 0 {
		return nil, fmt.Errorf("dist: NewZeroAdamW: the %d trainable parameters (%q first) have no element: nothing to shard: %w", len(o.params), o.params[0].Name, tensor.ErrArgument)
	}
	if o.n == 0 {
		return nil, fmt.Errorf("dist: NewZeroAdamW: no trainable parameter: %w", tensor.ErrArgument)
	}
	o.ctx = tensor.NewCtx()
	size := coll.Size()
	o.k = (o.n + size - 1) / size
	dev, dt := o.params[0].Value.Device(), o.params[0].Value.DType()
	alloc := func(role memory.Role, n int, label string) *tensor.Tensor {
		t, err := tensor.NewKept(dev, dt, role, n)
		if err != nil {
			panic(allocError{err})
		}
		t.SetLabel(label)
		return t
	}
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				a, ok := r.(allocError)
				if !ok {
					panic(r)
				}
				err = a.err
			}
		}()
		o.flatP = alloc(memory.RoleParameter, size*o.k, "dist.zero.params")
		o.flatG = alloc(memory.RoleGradient, size*o.k, "dist.zero.grads")
		o.m = alloc(memory.RoleOptimizerState, o.k, "exp_avg:dist.zero.shard")
		o.v = alloc(memory.RoleOptimizerState, o.k, "exp_avg_sq:dist.zero.shard")
		return tensor.Try(func() {
			for _, t := range []*tensor.Tensor{o.flatP, o.flatG, o.m, o.v} {
				t.Fill(0) // the padding stays 0
			}
		})
	}()
	if err != nil {
		o.Release()
		return nil, err
	}
	return o, nil
}

type allocError struct{ err error }

// SetLR sets the learning rate; the next Step refuses one that is NaN,
// infinite or negative.
func (o *ZeroAdamW) SetLR(lr float64) { o.LR = lr }

// Steps is the number of steps taken.
func (o *ZeroAdamW) Steps() int { return o.step }

// ShardElements is the number of elements of the flat parameter space
// this rank owns (and keeps moments for).
func (o *ZeroAdamW) ShardElements() int { return o.k }

// Release frees the buffers and the moments.
func (o *ZeroAdamW) Release() {
	for _, t := range []*tensor.Tensor{o.flatP, o.flatG, o.m, o.v} {
		if t != nil {
			t.Release()
		}
	}
	o.flatP, o.flatG, o.m, o.v = nil, nil, nil, nil
	o.steps = nil
}

// Step updates this rank's shard and all-gathers the parameters. It
// first checks the settings (those given to NewZeroAdamW and any set
// later, with SetLR or in the fields) and refuses, as nn.AdamW's Step
// does, before it changes anything: a learning rate, eps or weight decay
// that is NaN, infinite or negative, or a beta outside [0, 1), each an
// error wrapping tensor.ErrArgument that names the setting and its
// value; a gradient whose shape is not its parameter's (wrapping
// tensor.ErrShape), one of another dtype than its parameter's, except a
// half gradient of a float32 parameter (wrapping tensor.ErrDType), and a
// parameter frozen at NewZeroAdamW (it has no place in the shards) that
// was unfrozen since and has a gradient, each naming the parameter. The
// first Step then compares the ranks' trainable parameters (their number,
// names, dtypes, shapes, order and Decay flags) and settings (learning
// rate, betas, eps, weight decay, as they are then: later changes, a
// schedule's SetLR, are every rank's to make alike) in one small
// all-reduce: ranks whose parameters differ, which would all-gather
// shards of different parameters, or whose settings differ, which would
// all-gather shards updated by different rules, get an error wrapping
// ErrMismatch, on every rank, before anything changes. On an error the
// group is aborted (the other ranks' Step returns an error), as a rank
// that skips the step's AllGather must.
func (o *ZeroAdamW) Step() error {
	err := o.doStep()
	if err != nil {
		o.coll.Abort(err)
	}
	return err
}

func (o *ZeroAdamW) doStep() error {
	if o.flatP == nil {
		return fmt.Errorf("dist: ZeroAdamW.Step after Release: %w", tensor.ErrArgument)
	}
	if err := o.checkSettings("ZeroAdamW.Step"); err != nil {
		return err
	}
	for _, p := range o.params {
		if !updated(p) {
			continue
		}
		if !slices.Equal(p.Grad.Shape(), p.Value.Shape()) {
			return fmt.Errorf("dist: ZeroAdamW.Step: parameter %q has a gradient of shape %v, its value %v: %w", p.Name, p.Grad.Shape(), p.Value.Shape(), tensor.ErrShape)
		}
		// As nn.AdamW: the copy into the flat gradient would convert any
		// other dtype silently (a float64 gradient rounded, an int32 one
		// taken for a float one).
		if g, dt := p.Grad.DType(), p.Value.DType(); !nn.GradDTypeFits(g, dt) {
			return fmt.Errorf("dist: ZeroAdamW.Step: parameter %q has a %v gradient, its value %v: want its dtype, or bfloat16 or float16 for a float32 parameter: %w", p.Name, g, dt, tensor.ErrDType)
		}
	}
	for _, p := range o.frozen {
		if p.Grad != nil && p.RequiresGrad() {
			return fmt.Errorf("dist: ZeroAdamW.Step: parameter %q has a gradient but was frozen when NewZeroAdamW laid out the shards, so it has none: it would not be updated (nn.AdamW would); unfreeze parameters before NewZeroAdamW (this error aborts the group: continuing needs a new one): %w", p.Name, tensor.ErrArgument)
		}
	}
	if !o.agreed {
		// Ranks whose parameters differ in shape or order but not in
		// number of elements would all-gather shards of different
		// parameters, silently; ranks whose settings or Decay flags
		// differ, shards each updated with its own rank's.
		sig := sign(o.params, false, o.settings())
		if err := agree(o.coll, o.ctx, o.params[0].Value.Device(), "ZeroAdamW.Step", "trainable parameters", "names, dtypes, shapes, order, Decay flags or settings (learning rate, betas, eps, weight decay)", sig); err != nil {
			return err
		}
		o.agreed = true
	}
	lo, hi := o.coll.Rank()*o.k, (o.coll.Rank()+1)*o.k
	o.step++
	if o.steps == nil {
		o.steps = make([]int, len(o.params))
	}
	// Every rank counts every parameter with a gradient (the same ones on
	// every rank), whether its shard holds some of it or not; as nn.AdamW,
	// not one frozen since (SetRequiresGrad(false)) whose gradient is
	// left over.
	for i, p := range o.params {
		if updated(p) {
			o.steps[i]++
		}
	}
	if err := tensor.Try(func() {
		for i, p := range o.params {
			a, b := max(o.offs[i], lo), min(o.offs[i]+p.Value.Numel(), hi)
			if a >= b {
				continue
			}
			// This parameter's elements [a, b) of the flat space, and
			// the same of its value and gradient.
			pv := flatView(p.Value, a-o.offs[i], b-a)
			dst := flatView(o.flatP, a, b-a)
			dst.CopyFrom(pv)
			pv.Release()
			if !updated(p) {
				dst.Release()
				continue
			}
			gv := flatView(p.Grad, a-o.offs[i], b-a)
			g := flatView(o.flatG, a, b-a)
			g.CopyFrom(gv)
			m, v := flatView(o.m, a-lo, b-a), flatView(o.v, a-lo, b-a)
			wd := 0.0
			if p.Decay {
				wd = o.WeightDecay
			}
			tensor.AdamWStep(dst, g, m, v, o.LR, o.Beta1, o.Beta2, o.Eps, wd, o.steps[i])
			for _, t := range []*tensor.Tensor{dst, gv, g, m, v} {
				t.Release()
			}
		}
	}); err != nil {
		return err
	}
	if err := o.coll.AllGather(o.flatP); err != nil {
		return err
	}
	return tensor.Try(func() {
		for i, p := range o.params {
			src := flatView(o.flatP, o.offs[i], p.Value.Numel())
			dst := p.Value.Reshape(p.Value.Numel())
			dst.CopyFrom(src)
			src.Release()
			dst.Release()
		}
	})
}

// settings is what the first Step's signature covers besides the
// parameters' names, dtypes and shapes: each one's Decay flag and the
// settings, which every rank updates its shard with.
func (o *ZeroAdamW) settings() string {
	decay := make([]bool, len(o.params))
	for i, p := range o.params {
		decay[i] = p.Decay
	}
	return fmt.Sprintf("decay %v lr %v betas %v %v eps %v weight decay %v", decay, o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
}

// updated says whether Step updates p: as nn.AdamW, when it has a
// gradient and requires one.
func updated(p *nn.Parameter) bool { return p.Grad != nil && p.RequiresGrad() }

// checkSettings refuses what nn.AdamW's Step refuses
// (nn.CheckAdamWSettings), before anything changes.
func (o *ZeroAdamW) checkSettings(op string) error {
	return nn.CheckAdamWSettings("dist: "+op, o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
}

// flatView is elements [off, off+n) of t, as a 1-D view: of t itself
// when t is contiguous, else of a copy (only to read from).
func flatView(t *tensor.Tensor, off, n int) *tensor.Tensor {
	f := t.Reshape(t.Numel())
	v := f.Narrow(0, off, n)
	f.Release()
	return v
}
