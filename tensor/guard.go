package tensor

import (
	"fmt"
	"math"
)

// A training step that a CUDA graph can replay (CaptureGraph) must not
// read anything back to the host in its middle and must not bake values
// that change from step to step into kernel arguments: a graph replays
// its kernels with the arguments they were captured with. The host-driven
// step does both: it reads the gradient norm to choose the clip factor,
// reads the loss to stop before an update on a non-finite value, and
// passes the learning rate and AdamW's bias corrections as arguments.
//
// StepGuard and AdamWArgs move those decisions and values into memory:
// StepGuard.ClipGradNorm computes the norm, the clip factor and a skip
// flag (loss or norm not finite) on the device and scales the gradients
// there; AdamWStepsGuarded reads its constants from an AdamWArgs the host
// writes before each step (AdamWArgs.Set) and does nothing when the
// guard's flag is set. On a GPU both are mapped pinned host memory (the
// host reads the results after a synchronization and writes the next
// step's constants without a copy); on the CPU, Go memory. The arithmetic
// is the host-driven step's, operation for operation, so a guarded step,
// replayed from a graph or not, gives the same bits as ClipGradNorm
// followed by AdamWSteps.

// stepGuardWords mirrors struct StepGuard of kernels/guard.cuh.
type stepGuardWords struct {
	_     cudaStatusWords // Status: the sum of squares lands in its scalar
	loss  float64
	norm  float64
	coef  float32
	skip  int32
	inv   float32 // the gradient scaler's factor (SetUnscale)
	found int32   // Unscale found a gradient not finite
}

// adamwArgsWords mirrors struct AdamWArgs of kernels/optim.cuh.
type adamwArgsWords struct {
	lr, w1, beta2, w2, stepSize, bc2Sqrt, eps float64
	lerpLow                                   int32
	_                                         int32
}

// StepGuard holds what a guarded step decides on the device: the loss,
// the gradients' global norm, the clip factor and whether the update is
// skipped. Read it (Result) after the step has run.
type StepGuard struct {
	dev Device
	w   *stepGuardWords
	cu  *cudaMapped // the mapped block on a GPU; nil on the CPU
}

// NewStepGuard allocates a guard for steps on dev.
func NewStepGuard(dev Device) (*StepGuard, error) {
	w, m, err := guardWords[stepGuardWords](dev, "StepGuard", stepGuardBytes)
	if err != nil {
		return nil, err
	}
	return &StepGuard{dev: dev, w: w, cu: m}, nil
}

// guardWords allocates a guarded step's block of words W for dev: mapped
// pinned host memory of size bytes on a GPU (with its mapping), Go memory
// on the CPU. A nil dev is an *OpError wrapping ErrDevice (its guard
// or constants would fail at their first use).
func guardWords[W any](dev Device, what string, size int) (*W, *cudaMapped, error) {
	if dev == nil {
		return nil, nil, &OpError{Op: "New" + what, Msg: "nil device", Err: ErrDevice}
	}
	if d, ok := dev.(*cudaDevice); ok {
		m, err := d.newMapped(what, size)
		if err != nil {
			return nil, nil, err
		}
		return (*W)(m.host), m, nil
	}
	return new(W), nil, nil
}

// Release frees the guard's memory. The device must be done with it, and
// a graph that captured ops on it released first. On a GPU a released
// guard is an error wrapping ErrReleased where it is used again.
func (g *StepGuard) Release() {
	if g != nil {
		g.cu.free()
	}
}

// StepResult is what a guarded step reports.
type StepResult struct {
	Loss, Norm float64
	// Clip is the factor the gradients were multiplied by (1: none).
	Clip float64
	// Skipped: the loss or the norm was not finite, or Overflow, so the
	// guarded optimizer updates did nothing.
	Skipped bool
	// Overflow: Unscale found a gradient that was not finite (the fp16
	// gradient scaler's skipped step).
	Overflow bool
}

// Result waits for the device and returns what the last step that ran
// ClipGradNorm with g reported. It fails while a graph is being captured
// on the device (nothing has run yet).
func (g *StepGuard) Result() (StepResult, error) {
	if err := g.cu.live("StepGuard.Result"); err != nil {
		return StepResult{}, err
	}
	if err := g.dev.Synchronize(); err != nil {
		return StepResult{}, err
	}
	w := g.w
	return StepResult{Loss: w.loss, Norm: w.norm, Clip: float64(w.coef), Skipped: w.skip != 0, Overflow: w.found != 0}, nil
}

// SetUnscale writes the factor the next step's Unscale multiplies the
// gradients by (the fp16 gradient scaler's 1 / loss scale) and clears its
// found flag. On a GPU it first waits for the device, so that a step still
// queued reads what it was queued with.
func (g *StepGuard) SetUnscale(inv float64) error {
	if err := g.cu.beforeHostWrite(); err != nil {
		return err
	}
	g.w.inv, g.w.found = float32(inv), 0
	return nil
}

// Unscale queues the fp16 gradient scaler's unscale on grads' device
// (tensor.UnscaleGrads): every gradient multiplied by the factor SetUnscale
// wrote, rounded to float32, and the found flag raised when any element was
// not finite, before or (a factor above 1: a loss scale below 1, where a
// finite gradient can overflow) after it was multiplied, as
// amp.GradScaler.Unscale reports it, which makes the step's ClipGradNorm
// set the skip flag (the scaler skips the step); both paths test each
// product (UnscaleGrads on the CPU, unscale_guarded_f32 on CUDA).
// Gradients must be contiguous float32 on g's device; nil entries are
// ignored.
func (g *StepGuard) Unscale(grads []*Tensor) {
	ts := g.float32Grads("UnscaleGrads", grads)
	if d, ok := g.dev.(*cudaDevice); ok {
		modified(ts...)
		cudaBackend{d}.guardedGrads("UnscaleGrads", d.k.unscaleGuarded, g, ts)
		return
	}
	if len(ts) > 0 && !UnscaleGrads(ts, float64(g.w.inv)) {
		g.w.found = 1
	}
}

// float32Grads checks grads for a guarded op (contiguous float32 on g's
// device, no two sharing an element) and returns the non-nil ones.
func (g *StepGuard) float32Grads(op string, grads []*Tensor) []*Tensor {
	var ts []*Tensor
	for i, t := range grads {
		if t == nil {
			continue
		}
		t.live(op)
		if t.dev != g.dev {
			fail(op, ErrDevice, "gradient %d is on %v, the guard on %v", i, t.dev, g.dev)
		}
		if t.dtype != Float32 || !t.IsContiguous() {
			fail(op, ErrDType, "gradient %d is %v (contiguous %v): a guarded step takes contiguous float32 gradients", i, t.dtype, t.IsContiguous())
		}
		ts = append(ts, t)
	}
	disjoint(op, "the non-nil gradients", ts, nil)
	return ts
}

// ClipGradNorm queues on grads' device what nn.ClipGradNorm does on the
// host: the global L2 norm of grads, and, when maxNorm / (norm + 1e-6) is
// below 1, every gradient multiplied by it (rounded to float32); it also
// records loss (a float32 scalar, nil for none) and sets the skip flag
// when the loss or the norm is not finite or the step's Unscale found a
// gradient that was not. Gradients must be float32 and
// contiguous on g's device; nil entries are ignored. maxNorm may be +Inf
// (the norm only).
func (g *StepGuard) ClipGradNorm(grads []*Tensor, loss *Tensor, maxNorm float64) {
	const op = "ClipGradNorm"
	if math.IsNaN(maxNorm) || maxNorm <= 0 {
		fail(op, ErrArgument, "max norm %v: must be positive", maxNorm)
	}
	ts := g.float32Grads(op, grads)
	if loss != nil {
		loss.live(op)
		if loss.dev != g.dev || loss.dtype != Float32 || loss.Numel() != 1 {
			fail(op, ErrArgument, "loss %v %v on %v: want a float32 scalar on %v", loss.dtype, loss.shape, loss.dev, g.dev)
		}
	}
	if d, ok := g.dev.(*cudaDevice); ok {
		modified(ts...) // scaled when the norm is over maxNorm: counted as written
		cudaBackend{d}.clipGuarded(g, ts, loss, maxNorm)
		return
	}
	// The host's arithmetic (nn.ClipGradNorm), into the guard's words.
	var sum float64
	if len(ts) > 0 {
		sum = SumSquaresAll(ts)
	}
	total := math.Sqrt(sum)
	l := 0.0
	if loss != nil {
		l = loss.Item()
	}
	w := g.w
	w.norm, w.loss, w.coef, w.skip = total, l, 1, 0
	if c := maxNorm / (total + 1e-6); c < 1 {
		w.coef = float32(c)
		ScaleAll(ts, c)
	}
	if w.found != 0 || !finite(total) || !finite(l) {
		w.skip = 1
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// AdamWArgs holds the constants of one AdamW step for AdamWStepsGuarded:
// written by the host (Set) before the step runs, read by the update when
// it runs, so a graph that captured the update applies each replay's own
// learning rate and bias corrections.
type AdamWArgs struct {
	dev Device
	w   *adamwArgsWords
	cu  *cudaMapped
	// The host's inputs (the CPU's update takes them as they are).
	lr, beta1, beta2, eps float64
	step                  int
}

// NewAdamWArgs allocates the constants' block for updates on dev.
func NewAdamWArgs(dev Device) (*AdamWArgs, error) {
	w, m, err := guardWords[adamwArgsWords](dev, "AdamWArgs", adamwArgsBytes)
	if err != nil {
		return nil, err
	}
	return &AdamWArgs{dev: dev, w: w, cu: m}, nil
}

// Release frees the block. The device must be done with it, and a graph
// that captured an update reading it released first. On a GPU released
// constants are an error wrapping ErrReleased where they are used again.
func (a *AdamWArgs) Release() {
	if a != nil {
		a.cu.free()
	}
}

// Set writes the constants of step (counting from 1) with learning rate
// lr. On a GPU it first waits for the device, so that an update still
// queued reads the constants it was queued with.
func (a *AdamWArgs) Set(lr, beta1, beta2, eps float64, step int) error {
	if step < 1 {
		return &OpError{Op: "AdamW", Msg: fmt.Sprintf("step %d: steps count from 1", step), Err: ErrArgument}
	}
	if err := a.cu.beforeHostWrite(); err != nil {
		return err
	}
	c := adamwConstants(kF32, lr, beta1, beta2, eps, step) // unfolded: the float64 kernel folds
	*a.w = adamwArgsWords{lr: lr, w1: c.w1, beta2: c.beta2, w2: c.w2, stepSize: c.stepSize, bc2Sqrt: c.bc2Sqrt, eps: c.eps, lerpLow: c.lerpLow}
	a.lr, a.beta1, a.beta2, a.eps, a.step = lr, beta1, beta2, eps, step
	return nil
}

// AdamWStepsGuarded is AdamWSteps with the step's constants read from a
// (as last Set) when the update runs, and no update at all when guard
// (nil: none) has its skip flag set by the step's ClipGradNorm. Every
// parameter must be on a's device in one float dtype. The results are
// AdamWSteps' bit for bit.
func AdamWStepsGuarded(ps, gs, ms, vs []*Tensor, wd []float64, a *AdamWArgs, guard *StepGuard) {
	const op = "AdamW"
	if a == nil {
		fail(op, ErrArgument, "nil AdamWArgs: the guarded update reads its constants from one (NewAdamWArgs)")
	}
	adamwCheckLens(op, ps, gs, ms, vs, wd, max(a.step, 1))
	if guard != nil && guard.dev != a.dev {
		fail(op, ErrDevice, "the guard is on %v, the constants on %v", guard.dev, a.dev)
	}
	for i, p := range ps {
		adamwCheckParam(op, i, p, gs[i], ms[i], vs[i], false)
		if p.dev != a.dev || p.dtype != ps[0].dtype {
			fail(op, ErrArgument, "parameter %d is %v on %v: a guarded update takes one float dtype (%v) on the constants' device %v", i, p.dtype, p.dev, ps[0].dtype, a.dev)
		}
	}
	adamwCheckDisjoint(op, ps, gs, ms, vs)
	modified(ps...)
	modified(ms...)
	modified(vs...)
	if len(ps) == 0 {
		return
	}
	// A captured update reads the constants each replay's Set writes;
	// one that runs now needs them written.
	if a.step < 1 && !Capturing(a.dev) {
		fail(op, ErrArgument, "AdamWArgs not set: call Set before the update")
	}
	if d, ok := a.dev.(*cudaDevice); ok {
		cudaBackend{d}.adamwGuarded(ps, gs, ms, vs, wd, a, guard)
		return
	}
	if guard != nil && guard.w.skip != 0 {
		return
	}
	b := a.dev.backend()
	for i, p := range ps {
		b.adamw(p, gs[i], ms[i], vs[i], a.lr, a.beta1, a.beta2, a.eps, wd[i], a.step)
	}
}
