package nn

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Optimizer updates parameters from their gradients.
type Optimizer interface {
	// Step applies one update to every parameter that has a gradient.
	Step() error
	// SetLR changes the learning rate (for schedules).
	SetLR(lr float64)
	// Release frees the optimizer's state.
	Release()
}

// AdamW is PyTorch's torch.optim.AdamW (decoupled weight decay), applied
// to parameters with Decay set; others get weight decay 0 (nanoGPT's
// grouping). Moments are allocated on first use with role optimizer.
// As in PyTorch, each parameter counts its own updates (state["step"]),
// which its bias correction uses: a parameter that first gets a gradient
// at a later step (one unfrozen, or not reached by the first steps'
// losses) starts its bias correction at 1 as well.
type AdamW struct {
	Params []*Parameter
	// Eps may be 0, as PyTorch allows: an element whose gradient has been
	// exactly 0 every step then updates by 0/0, NaN, as it does there
	// (train-gpt stops on the non-finite weights' loss).
	LR, Beta1, Beta2, Eps float64
	WeightDecay           float64
	// Overlap queues each Step to run beside what follows it: on a GPU
	// the update runs on the device's side stream in groups of Params, in
	// their order (a model's Parameters are in the order its forward pass
	// reads them), and the next forward pass waits per group, for the
	// parameters it is about to read (tensor.AdamWStepsOverlapped); the
	// backward pass starts once the update is over
	// (tensor.WaitOverlapped), so that the gradients it frees are reused
	// for the new ones. The results are the same bits. It costs memory:
	// the gradients stay allocated until their group is updated, through
	// the forward pass. Under a tight device budget that memory pushes
	// more state off the device than the overlap hides (gpt2-medium under
	// 4 GiB: 31-37k tokens/s overlapped against 52k, on the H200,
	// bench/results/hybrid-2026-12-02-s10.md); it is for updates that are
	// slow with memory to spare.
	Overlap bool
	// Pipeline queues each Step as Overlap does, but a layer at a time
	// and giving the gradients back as it goes (tensor.AdamWStepsPipelined):
	// the groups are a model's layers in the order of Params (a GPT's
	// embeddings, then each block, then the final norm: PipelineGroups),
	// each group's gradients are released (Grad set to nil) as soon as
	// its update is queued, and on a GPU their memory returns to the pool
	// once that group has run, while the host queues the next forward
	// pass a group at a time behind the update, so that the forward pass
	// reuses the gradients of the layers already updated instead of
	// holding them all, as Overlap did. The results are the same bits.
	// After a pipelined Step the updated parameters have no gradient.
	// It takes precedence over Overlap. Moments that the placement put in
	// pinned host memory go through the device's copy ring (the copy
	// engines bring them in and write them back while the kernel updates
	// them: tensor's cuda_ring.go); under a device budget call
	// tensor.PreparePipelineRing before training, while the budget has
	// room for the ring's slots.
	Pipeline bool
	// PipelineWidth is the most blocks a pipelined update runs at once on
	// a GPU, each striding over its group's rows (0: a quarter of the SMs), so
	// that an update bound by the bus stays resident and busy while the
	// forward pass beside it has the other SMs.
	PipelineWidth int
	step          int                // Step calls
	steps         map[*Parameter]int // updates of each parameter: its bias correction
	guarded       []*Parameter       // what the last StepGuarded queued, for CommitGuarded
	checked       checkedParams      // Params as last found free of duplicates
	m, v          map[*Parameter]*tensor.Tensor
}

// NewAdamW returns AdamW with PyTorch's defaults for the betas and eps.
// It returns no error: Step checks the settings (these and any set later,
// with SetLR or in the fields) before it changes anything, and refuses
// what torch.optim.AdamW refuses with ValueError, and the infinities
// (which make every weight NaN) too: a learning rate, weight decay or eps
// that is NaN, infinite or negative, a beta outside [0, 1), and an empty
// parameter list, each an error wrapping tensor.ErrArgument.
func NewAdamW(ps []*Parameter, lr, weightDecay float64) *AdamW {
	return &AdamW{Params: ps, LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: weightDecay,
		steps: map[*Parameter]int{}, m: map[*Parameter]*tensor.Tensor{}, v: map[*Parameter]*tensor.Tensor{}}
}

// SetLR sets the learning rate; the next Step refuses one that is NaN,
// infinite or negative.
func (o *AdamW) SetLR(lr float64) { o.LR = lr }

// Steps is the number of steps taken.
func (o *AdamW) Steps() int { return o.step }

// Step updates every parameter with a gradient, each bias-corrected by its
// own update count (one launch per count when they differ). The moments a
// first step needs are allocated before any parameter changes, so a step
// that runs out of memory for them leaves the parameters and the step
// counts as they were; when the counts differ and a later launch fails,
// the step is taken for the parameters an earlier one updated (they and
// Steps count it), so that no parameter's count exceeds Steps. A
// parameter listed twice in Params is an error (wrapping
// tensor.ErrArgument), checked again whenever Params changes.
func (o *AdamW) Step() error {
	if err := o.check(); err != nil {
		return err
	}
	return tensor.Try(func() {
		us := o.updates()
		for i, u := range us {
			o.apply(u)
			if i == 0 {
				o.step++ // taken once a parameter has changed
			}
			for _, p := range u.pp {
				o.steps[p]++
			}
		}
		if len(us) == 0 {
			o.step++
		}
	})
}

// check is what every step checks first: the settings (checkSettings),
// then the parameters (at least one, each listed once).
func (o *AdamW) check() error {
	if o == nil {
		return fmt.Errorf("nn: AdamW: nil optimizer: %w", tensor.ErrArgument)
	}
	if err := o.checkSettings(); err != nil {
		return err
	}
	if err := nonEmpty("AdamW", o.Params); err != nil {
		return err
	}
	return o.checked.check("AdamW", o.Params)
}

// nonEmpty refuses an optimizer over no parameters (PyTorch's "optimizer
// got an empty parameter list"): its steps would update nothing.
func nonEmpty(op string, ps []*Parameter) error {
	if len(ps) == 0 {
		return fmt.Errorf("nn: %s: optimizer got an empty parameter list: %w", op, tensor.ErrArgument)
	}
	return nil
}

// checkSettings refuses the settings torch.optim.AdamW refuses, and the
// infinities (CheckAdamWSettings).
func (o *AdamW) checkSettings() error {
	return CheckAdamWSettings("nn: AdamW", o.LR, o.Beta1, o.Beta2, o.Eps, o.WeightDecay)
}

// CheckAdamWSettings refuses AdamW settings that torch.optim.AdamW
// refuses with ValueError, and the infinities, which make every weight
// NaN: a learning rate, eps or weight decay that is NaN, infinite or
// negative, a beta outside [0, 1). The error, wrapping tensor.ErrArgument,
// starts with who (as "nn: AdamW") and names the setting by PyTorch's
// name and its value. AdamW's Step and dist's ZeroAdamW check with it.
func CheckAdamWSettings(who string, lr, beta1, beta2, eps, weightDecay float64) error {
	for _, err := range []error{
		finiteNonNegative(who, "lr", lr),
		finiteNonNegative(who, "eps", eps),
		beta(who, "beta1", beta1),
		beta(who, "beta2", beta2),
		finiteNonNegative(who, "weight_decay", weightDecay),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// finiteNonNegative refuses a setting that is NaN, infinite or negative.
func finiteNonNegative(who, name string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 1) {
		return fmt.Errorf("%s: %s = %v: want a finite value >= 0: %w", who, name, v, tensor.ErrArgument)
	}
	return nil
}

// beta refuses a beta outside [0, 1) (PyTorch's "Invalid beta parameter").
func beta(who, name string, v float64) error {
	if !(v >= 0 && v < 1) {
		return fmt.Errorf("%s: %s = %v: want 0 <= %s < 1: %w", who, name, v, name, tensor.ErrArgument)
	}
	return nil
}

// apply runs one update of u's parameters: one launch for every
// parameter of a device and dtype (tensor.AdamWSteps checks them all
// before changing any), or one a group when overlapped or pipelined.
func (o *AdamW) apply(u adamwUpdate) {
	switch {
	case o.Pipeline:
		tensor.AdamWStepsPipelined(u.ps, u.gs, u.ms, u.vs, u.wds, o.LR, o.Beta1, o.Beta2, o.Eps, u.step, pipelineGroups(u.pp), o.PipelineWidth,
			func(lo, hi int) {
				for _, p := range u.pp[lo:hi] {
					p.ZeroGrad()
				}
			})
	case o.Overlap:
		tensor.AdamWStepsOverlapped(u.ps, u.gs, u.ms, u.vs, u.wds, o.LR, o.Beta1, o.Beta2, o.Eps, u.step, overlapGroup(u.ps))
	default:
		tensor.AdamWSteps(u.ps, u.gs, u.ms, u.vs, u.wds, o.LR, o.Beta1, o.Beta2, o.Eps, u.step)
	}
}

// adamwUpdate is the parameters of one step that share a step count: their
// values, gradients, moments and weight decays, in the order of Params.
type adamwUpdate struct {
	step           int // the count this update makes them (1-based)
	pp             []*Parameter
	ps, gs, ms, vs []*tensor.Tensor
	wds            []float64
}

// updates lists the parameters with a gradient, with their values,
// gradients, moments and weight decays, one list per step count (one in a
// run where every parameter is updated at every step). The moments a
// first step needs are allocated before any list is made (panicking with
// an *OpError when memory runs out), so a step that fails there leaves
// everything as it was.
func (o *AdamW) updates() []adamwUpdate {
	for _, p := range o.Params {
		if p.Grad != nil && p.RequiresGrad() {
			o.state(p)
		}
	}
	var us []adamwUpdate
	for _, p := range o.Params {
		if p.Grad == nil || !p.RequiresGrad() {
			continue
		}
		m, v := o.state(p)
		wd := 0.0
		if p.Decay {
			wd = o.WeightDecay
		}
		i := slices.IndexFunc(us, func(u adamwUpdate) bool { return u.step == o.steps[p]+1 })
		if i < 0 {
			i = len(us)
			us = append(us, adamwUpdate{step: o.steps[p] + 1})
		}
		u := &us[i]
		u.pp = append(u.pp, p)
		u.ps, u.gs, u.ms, u.vs = append(u.ps, p.Value), append(u.gs, p.Grad), append(u.ms, m), append(u.vs, v)
		u.wds = append(u.wds, wd)
	}
	return us
}

// overlapGroup is the group size of an overlapped step: a 32nd of the
// parameters' bytes, at least 4 MiB (a group is a launch, an event and a
// wait of the forward pass; a GPT's blocks are a few groups each).
func overlapGroup(ps []*tensor.Tensor) int64 {
	var n int64
	for _, p := range ps {
		n += p.Bytes()
	}
	return max(n/32, 4<<20)
}

func (o *AdamW) state(p *Parameter) (m, v *tensor.Tensor) {
	if m, ok := o.m[p]; ok {
		return m, o.v[p]
	}
	if o.m == nil { // a struct literal: no state yet
		o.m, o.v = map[*Parameter]*tensor.Tensor{}, map[*Parameter]*tensor.Tensor{}
	}
	if o.steps == nil {
		o.steps = map[*Parameter]int{}
	}
	m, v = newMoments(p)
	o.m[p], o.v[p] = m, v
	return m, v
}

// newMoments allocates zeroed moments for p, outside every scope; when
// the second allocation fails (a panic) the first is freed.
func newMoments(p *Parameter) (m, v *tensor.Tensor) {
	m = zerosKept(p.Value)
	defer func() {
		if v == nil { // the second allocation failed (a panic): free the first
			m.Release()
		}
	}()
	v = zerosKept(p.Value)
	m.SetLabel("exp_avg:" + p.Name) // PyTorch's state names, in placement plans and snapshots
	v.SetLabel("exp_avg_sq:" + p.Name)
	return m, v
}

// zerosKept allocates optimizer state like t, outside every scope.
func zerosKept(t *tensor.Tensor) *tensor.Tensor {
	z, err := tensor.NewKept(t.Device(), t.DType(), memory.RoleOptimizerState, t.Shape()...)
	if err != nil {
		panic(err)
	}
	z.Fill(0)
	return z
}

// Release frees the moment buffers and forgets the parameters' step
// counts (moments made again start from zero, at step 1).
func (o *AdamW) Release() {
	for _, m := range []map[*Parameter]*tensor.Tensor{o.m, o.v} {
		for p, t := range m {
			t.Release()
			delete(m, p)
		}
	}
	clear(o.steps)
}

// SGD is torch.optim.SGD with momentum, weight decay and Nesterov.
type SGD struct {
	Params                    []*Parameter
	LR, Momentum, WeightDecay float64
	Nesterov                  bool
	buf                       map[*Parameter]*tensor.Tensor
	checked                   checkedParams // Params as last found free of duplicates
}

// NewSGD returns plain SGD with the given momentum. It returns no error:
// Step checks the settings (these and any set later, with SetLR or in the
// fields) before it changes anything, and refuses what torch.optim.SGD
// refuses with ValueError, and NaN and the infinities too: a learning
// rate, momentum or weight decay that is NaN, infinite or negative,
// Nesterov without momentum, and an empty parameter list, each an error
// wrapping tensor.ErrArgument.
func NewSGD(ps []*Parameter, lr, momentum float64) *SGD {
	return &SGD{Params: ps, LR: lr, Momentum: momentum, buf: map[*Parameter]*tensor.Tensor{}}
}

// SetLR sets the learning rate; the next Step refuses one that is NaN,
// infinite or negative.
func (o *SGD) SetLR(lr float64) { o.LR = lr }

// GradDTypeFits reports whether a gradient of dtype grad may update a
// parameter of dtype param: the same dtype, or bfloat16 or float16 for a
// float32 parameter (read widened, as AdamW's update reads it). SGD and
// dist's ZeroAdamW refuse any other with tensor.ErrDType, as AdamW does.
func GradDTypeFits(grad, param tensor.DType) bool {
	return grad == param || grad.IsHalf() && param == tensor.Float32
}

// Step updates every parameter with a gradient. Gradients kept in a half
// dtype (GPT.SetBlockGradDType) are widened to their float32 parameter's,
// as AdamW takes them (a gradient of any other dtype than its
// parameter's is an error wrapping tensor.ErrDType, before any parameter
// changes), one parameter at a time (each float32 copy released
// after its update: all of them at once would hold the gradients in both
// dtypes at the step's peak). The momentum buffers are allocated before
// any parameter changes, so a step whose buffers do not fit leaves the
// parameters as they were; running out of memory for a widened gradient
// mid-step leaves the parameters before it updated. A parameter listed
// twice in Params is an error (wrapping tensor.ErrArgument), checked
// again whenever Params changes.
func (o *SGD) Step() error {
	if err := o.check(); err != nil {
		return err
	}
	return tensor.Try(func() {
		var ps []*Parameter
		for _, p := range o.Params {
			if p.Grad == nil || !p.RequiresGrad() {
				continue
			}
			if g, dt := p.Grad.DType(), p.Value.DType(); !GradDTypeFits(g, dt) {
				panic(&tensor.OpError{Op: "nn.SGD", Msg: fmt.Sprintf("gradient %v of parameter %q %v: want its dtype, or bfloat16 or float16 for a float32 parameter", g, p.Name, dt), Err: tensor.ErrDType})
			}
			ps = append(ps, p)
			if o.Momentum != 0 && o.buf[p] == nil {
				if o.buf == nil { // a struct literal: no state yet
					o.buf = map[*Parameter]*tensor.Tensor{}
				}
				o.buf[p] = zerosKept(p.Value)
			}
		}
		for _, p := range ps {
			g := p.Grad
			if dt := p.Value.DType(); g.DType() != dt {
				g = g.To(dt)
			}
			func() {
				if g != p.Grad {
					defer g.Release()
				}
				tensor.SGDStep(p.Value, g, o.buf[p], o.LR, o.Momentum, o.WeightDecay, o.Nesterov)
			}()
		}
	})
}

// check is what every step checks first: the settings, then the
// parameters (at least one, each listed once).
func (o *SGD) check() error {
	const who = "nn: SGD"
	if o == nil {
		return fmt.Errorf("nn: SGD: nil optimizer: %w", tensor.ErrArgument)
	}
	for _, s := range []struct {
		name string
		v    float64
	}{{"lr", o.LR}, {"momentum", o.Momentum}, {"weight_decay", o.WeightDecay}} {
		if err := finiteNonNegative(who, s.name, s.v); err != nil {
			return err
		}
	}
	if o.Nesterov && o.Momentum == 0 {
		return fmt.Errorf("nn: SGD: Nesterov needs momentum > 0: %w", tensor.ErrArgument)
	}
	if err := nonEmpty("SGD", o.Params); err != nil {
		return err
	}
	return o.checked.check("SGD", o.Params)
}

// Release frees the momentum buffers.
func (o *SGD) Release() {
	for p, t := range o.buf {
		t.Release()
		delete(o.buf, p)
	}
}

// ClipGradNorm scales all gradients so that their joint L2 norm is at
// most maxNorm, as torch.nn.utils.clip_grad_norm_ (scale maxNorm/(n+1e-6)
// applied only when it is below 1). It returns the norm before clipping.
// As in PyTorch, a maxNorm of +Inf never clips and 0 zeroes the
// gradients; a negative or NaN one is an error, as is a parameter listed
// twice in ps (both wrapping tensor.ErrArgument), and the gradients are
// left as they were. Unlike PyTorch, which multiplies every gradient by
// NaN when the norm is NaN (a NaN gradient), a NaN norm scales nothing:
// it is returned with the gradients intact, for the caller to skip the
// step (train-gpt stops, naming the non-finite norm).
func ClipGradNorm(ps []*Parameter, maxNorm float64) (float64, error) {
	if !(maxNorm >= 0) {
		return 0, fmt.Errorf("nn: ClipGradNorm: max norm = %v: want >= 0 (+Inf: no clipping): %w", maxNorm, tensor.ErrArgument)
	}
	if err := distinct("ClipGradNorm", ps); err != nil {
		return 0, err
	}
	var total float64
	err := tensor.Try(func() {
		// One reduction and one wait for all gradients of a device (on a
		// GPU, a synchronization a parameter cost milliseconds a step).
		var devs []tensor.Device
		byDev := map[tensor.Device][]*tensor.Tensor{}
		for _, p := range ps {
			if g := p.Grad; g != nil {
				if _, ok := byDev[g.Device()]; !ok {
					devs = append(devs, g.Device())
				}
				byDev[g.Device()] = append(byDev[g.Device()], g)
			}
		}
		for _, d := range devs {
			total += tensor.SumSquaresAll(byDev[d])
		}
		total = math.Sqrt(total)
		if c := maxNorm / (total + 1e-6); c < 1 {
			for _, d := range devs {
				tensor.ScaleAll(byDev[d], c) // one launch a device
			}
		}
	})
	return total, err
}

// CosineSchedule is linear warm-up to MaxLR over Warmup steps, then cosine
// decay to MinLR at step Total (and MinLR after it), as nanoGPT. The
// warm-up comes first, as in nanoGPT's get_lr: with Warmup at or past
// Total there is no decay, the rate rises for Warmup steps (past Total
// too) and is MinLR from step Warmup on.
type CosineSchedule struct {
	Warmup, Total int
	MaxLR, MinLR  float64
}

// LR is the learning rate at 0-based step it. A negative step is step 0
// and a negative Warmup none (they gave rates outside [MinLR, MaxLR]: a
// negative one at step -3 without warm-up).
func (s CosineSchedule) LR(it int) float64 {
	it, s.Warmup = max(it, 0), max(s.Warmup, 0)
	if it < s.Warmup {
		// In float64: Warmup+1 overflowed int at the largest Warmup.
		return s.MaxLR * (float64(it) + 1) / (float64(s.Warmup) + 1)
	}
	if it >= s.Total {
		return s.MinLR
	}
	r := (float64(it) - float64(s.Warmup)) / math.Max(1, float64(s.Total)-float64(s.Warmup))
	return s.MinLR + 0.5*(1+math.Cos(math.Pi*r))*(s.MaxLR-s.MinLR)
}

// Step runs fn as one step of work in a new scope of c (tensor.Background
// when c is nil), so everything the step creates is released when it
// returns, and returns fn's error, or the *tensor.OpError an op panicked
// with (a shape mistake, running out of memory): the tensor.Try and
// Ctx.WithScope pair a training or evaluation loop wraps around each step.
// Any other panic (a bug) is passed on. Tensors the step must hand out
// are copied to Go values (Item, Float32s) or kept (tensor.Keep). A nil
// fn is an error wrapping tensor.ErrArgument, as TrainStep's nil loss
// function is (called, it was a nil-pointer panic that Step passed on).
func Step(c *tensor.Ctx, fn func() error) error {
	if fn == nil {
		return fmt.Errorf("nn: Step: nil step function: %w", tensor.ErrArgument)
	}
	if c == nil {
		c = tensor.Background()
	}
	var err error
	if perr := tensor.Try(func() { c.WithScope(func() { err = fn() }) }); perr != nil {
		return perr
	}
	return err
}

// ErrNonFinite is returned (wrapped) by TrainStep for a loss that is NaN
// or infinite.
var ErrNonFinite = errors.New("non-finite loss")

// TrainStep is one optimisation step, run with Step in a new scope of c:
// it clears the gradients of ps, calls loss (the forward pass, which must
// return a scalar), back-propagates it and lets opt update the
// parameters, and returns the loss's value. It returns Step's errors,
// Backward's and opt.Step's; a NaN or infinite loss is an error wrapping
// ErrNonFinite, returned before backward, so the parameters stay as they
// were; a nil opt or loss, a nil entry in ps, or a loss that returns
// nil, is an error wrapping tensor.ErrArgument. The gradients stay in ps
// after the step (for inspection) until the next TrainStep or ZeroGrad.
// For gradient clipping, a gradient scaler or accumulation over several
// batches, write the step with Step: it is the same five lines with the
// extra call between Backward and opt.Step.
func TrainStep(c *tensor.Ctx, ps []*Parameter, opt Optimizer, loss func() *autograd.Var) (float64, error) {
	if opt == nil || loss == nil {
		return 0, fmt.Errorf("nn: TrainStep: nil optimizer or loss function (optimizer nil: %v, loss nil: %v): %w", opt == nil, loss == nil, tensor.ErrArgument)
	}
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return 0, fmt.Errorf("nn: TrainStep: %w", err)
		}
	}
	var v float64
	err := Step(c, func() error {
		ZeroGrad(ps)
		l := loss()
		if l == nil || l.Value == nil {
			return fmt.Errorf("nn: TrainStep: the loss function returned nil: %w", tensor.ErrArgument)
		}
		if v = l.Item(); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("nn: TrainStep: loss = %v: %w", v, ErrNonFinite)
		}
		if err := l.Backward(); err != nil {
			return err
		}
		return opt.Step()
	})
	return v, err
}
