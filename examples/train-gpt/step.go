package main

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// step runs one training step on the batch in t.xs, t.ys and returns the
// loss. Everything the step allocates lives in one scope, so memory in use
// after each step is the same.
//
// A step that fails (out of memory, a device error) changes nothing
// before its optimizer update: its gradients are released and the
// gradient scaler forgets it, so the next step can run. A non-finite loss
// or gradient norm stops the run before the update, with the weights of
// the step before; under the fp16 gradient scaler, overflowing gradients
// skip the update instead, as the scaler does, and maxSkips skips in a
// row stop the run. With clipping off (-clip 0) the norm is still
// computed, for the check.
func (t *trainer) step(it int) (loss float64, err error) { return t.stepOn(it, nil) }

// stepOn is step on the batch of a loader slot (nil: t.xs, t.ys).
func (t *trainer) stepOn(it int, s *slot) (loss float64, err error) {
	if t.dp != nil {
		return t.dp.step(it, s) // every rank's stepOn on its rows (dataparallel.go)
	}
	if t.graph != nil && t.opt.Steps() > 0 {
		return t.graphStepOn(it, s) // the captured step (graph.go)
	}
	defer func() {
		if err != nil {
			nn.ZeroGrad(t.params)
			t.scaler.AbortStep()
		}
	}()
	// The closure sets err; a panic with an *OpError (out of memory, a
	// device error) becomes Try's error. (Assigning Try's result to err
	// would overwrite the closure's error with nil.)
	if e := tensor.Try(func() {
		t.c.WithScope(func() {
			t.mark(phaseStart)
			x, y := t.batchInputs(s)
			var l *autograd.Var
			amp.With(t.c, t.prec, func() { l = t.model.Loss(x, y) })
			t.mark(phaseForward)
			tensor.TracePipelineMark(t.dev, phaseForward) // STRATA_PIPELINE_TRACE only
			if s := t.scaler.LossScale(); s != 1 {
				err = l.BackwardWith(t.c.Full(t.dev, tensor.Float32, s))
			} else {
				err = l.Backward()
			}
			if err == nil && t.sync != nil {
				err = t.sync() // data-parallel: the gradients' mean over the GPUs
			}
			t.mark(phaseBackward)
			tensor.TracePipelineMark(t.dev, phaseBackward)
			if err != nil {
				return
			}
			// The gradients' checks are queued right behind the backward
			// pass and their reads wait for it; the loss, computed long
			// before, is read after them without a wait of its own (read
			// first, its wait left the device idle while the host then
			// queued the gradient norm).
			if !t.scaler.Unscale(grads(t.params)) { // fp16 overflow: skip the step
				loss = l.Item()
				t.scaler.Update()
				nn.ZeroGrad(t.params)
				err = t.skipped(loss)
				return
			}
			// The scaler's Update comes after the optimizer's step, as
			// PyTorch's scaler.update() follows scaler.step(optimizer): a
			// step that fails before its update is done (an error in the
			// clipping or the optimizer) is forgotten (AbortStep, above),
			// not counted as a good step toward GrowthInterval.
			var norm float64
			if norm, err = nn.ClipGradNorm(t.params, t.maxNorm()); err != nil {
				return
			}
			t.mark(phaseClip)
			loss = l.Item()
			t.mark(phaseLossRead)
			if !finite(loss) || !finite(norm) {
				err = notFinite(loss, norm)
				return
			}
			var opt nn.Optimizer = t.opt
			if t.altOpt != nil {
				opt = t.altOpt
			}
			opt.SetLR(t.sched.LR(it))
			if err = opt.Step(); err != nil {
				return
			}
			t.scaler.Update()
			t.skips = 0
			nn.ZeroGrad(t.params)
			t.mark(phaseOptimizer)
		})
	}); e != nil {
		err = e
	}
	if err == nil {
		err = t.place(it + 1) // between steps: nothing of the step is live
	}
	return loss, err
}

// skipped counts a step the fp16 gradient scaler skipped (after its
// Update) and stops the run after -max-skips in a row.
func (t *trainer) skipped(loss float64) error {
	if t.skips++; t.skips >= t.maxSkips {
		return noUpdateError{fmt.Errorf("the fp16 gradient scaler skipped %d steps in a row for overflowing gradients (loss scale now %g, loss %.4g): stopping (-max-skips)", t.skips, t.scaler.LossScale(), loss)}
	}
	return nil
}

// maxNorm is the gradient clipping's max norm: -clip, or +Inf for -clip 0
// (no clipping: the norm only, for the finiteness check).
func (t *trainer) maxNorm() float64 {
	if t.clip == 0 {
		return math.Inf(1)
	}
	return t.clip
}

// notFinite is the error of a step whose loss or gradient norm is not
// finite, stopped before its update.
func notFinite(loss, norm float64) error {
	return noUpdateError{fmt.Errorf("loss %v, gradient norm %v: not finite; stopped before the optimizer update, so the weights are those of the step before (lower -lr, or check the data)", loss, norm)}
}

// noUpdateError is the error of a step that stopped the run before its
// optimizer update (notFinite, -max-skips): the weights and the
// optimizer's state are still those of the step before, which the run
// saves (trainSteps) for a -resume with a lower -lr, say. Any other
// failure may come after a part of the update.
type noUpdateError struct{ error }

func (e noUpdateError) Unwrap() error { return e.error }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// inputs uploads the batch in t.xs, t.ys as int32 (B, T) tensors with
// memory role staging: on the GPU the hybrid policy puts them in mapped
// pinned host memory, which the kernels read over the bus without a
// separate copy.
func (t *trainer) inputs() (x, y *tensor.Tensor) { return t.upload(t.xs, t.ys) }

func (t *trainer) upload(xs, ys []int32) (x, y *tensor.Tensor) {
	t.c.WithRole(memory.RoleStaging, func() {
		x = t.c.FromInt32s(t.dev, xs, t.B, t.T)
		y = t.c.FromInt32s(t.dev, ys, t.B, t.T)
	})
	return x, y
}

// batchInputs is the batch of slot s as tensors: the slot's own (staging
// memory the loader wrote), or its host slices uploaded; t.xs, t.ys
// uploaded when s is nil.
func (t *trainer) batchInputs(s *slot) (x, y *tensor.Tensor) {
	switch {
	case s == nil:
		return t.inputs()
	case s.x != nil:
		// Views of the slot's tensors in t's context: the ops over them
		// run in it (its scope, its dropout stream), and the scope's end
		// releases the views, not the slot.
		return t.c.Adopt(s.x.Alias()), t.c.Adopt(s.y.Alias())
	}
	return t.upload(s.xs, s.ys)
}

// grads lists the parameters' gradients (nil where a parameter has none).
func grads(ps []*nn.Parameter) []*tensor.Tensor {
	gs := make([]*tensor.Tensor, len(ps))
	for i, p := range ps {
		gs[i] = p.Grad
	}
	return gs
}
