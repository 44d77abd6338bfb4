package nn

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// The guarded step: ClipGradNormGuarded and AdamW's PrepareGuarded and
// StepGuarded are ClipGradNorm and Step with every decision and every
// per-step constant in device memory (tensor.StepGuard, tensor.AdamWArgs),
// so that a CUDA graph can capture them (tensor.CaptureGraph) and replay
// them step after step. The results are the same bits as the host-driven
// step's.

// ClipGradNormGuarded queues nn.ClipGradNorm on the device: the global
// norm of the parameters' gradients, every gradient scaled when it is
// above maxNorm, and loss (a float32 scalar, or nil) recorded; a loss or
// norm that is not finite sets the guard's skip flag, which makes
// StepGuarded do nothing. Read them with g.Result after the step has run.
// maxNorm must be > 0 (+Inf never clips); unlike ClipGradNorm, 0 is
// refused: a maxNorm that is 0, negative or NaN, like a parameter listed
// twice in ps or a nil g, is an error wrapping tensor.ErrArgument.
func ClipGradNormGuarded(ps []*Parameter, loss *tensor.Tensor, maxNorm float64, g *tensor.StepGuard) error {
	if g == nil { // the guard's methods would dereference it: a crash, not an OpError
		return fmt.Errorf("nn: ClipGradNormGuarded: nil StepGuard (tensor.NewStepGuard): %w", tensor.ErrArgument)
	}
	if err := distinct("ClipGradNormGuarded", ps); err != nil {
		return err
	}
	return tensor.Try(func() {
		var gs []*tensor.Tensor
		for _, p := range ps {
			if p.Grad != nil {
				gs = append(gs, p.Grad)
			}
		}
		g.ClipGradNorm(gs, loss, maxNorm)
	})
}

// PrepareGuarded writes the constants of the next step (learning rate,
// bias corrections of step Steps()+1) into a for StepGuarded: call it
// before each guarded step, or before each replay of a graph that
// captured one, and CommitGuarded after it. A nil a is an error wrapping
// tensor.ErrArgument.
func (o *AdamW) PrepareGuarded(a *tensor.AdamWArgs) error {
	if a == nil { // Set would dereference it: a crash, not an error
		return fmt.Errorf("nn: AdamW: PrepareGuarded: nil AdamWArgs (tensor.NewAdamWArgs): %w", tensor.ErrArgument)
	}
	if err := o.checkSettings(); err != nil {
		return err
	}
	return a.Set(o.LR, o.Beta1, o.Beta2, o.Eps, o.step+1)
}

// CommitGuarded counts the guarded step that ran, unless its guard skipped
// the update (tensor.StepResult.Skipped): a skipped step is not a step, as
// for Step, which is not called then. The parameters the last StepGuarded
// queued count it (a replayed graph updates the same ones).
func (o *AdamW) CommitGuarded(skipped bool) {
	if !skipped {
		o.step++
		for _, p := range o.guarded {
			o.steps[p]++
		}
	}
}

// StepGuarded queues the update of every parameter with a gradient, as
// Step, with the constants PrepareGuarded wrote into a read when it runs,
// and nothing done when guard's skip flag is set (nil: never). Every
// parameter it updates must have been updated Steps() times (the bias
// corrections PrepareGuarded wrote are the optimizer's step's); one that
// has fewer updates (its first gradient came later) is an error: use
// Step. It does not count the step (CommitGuarded does). While a graph is
// captured the moments must exist already: take one step before capturing.
// A parameter listed twice in Params is an error, as for Step.
func (o *AdamW) StepGuarded(a *tensor.AdamWArgs, guard *tensor.StepGuard) error {
	if err := o.check(); err != nil {
		return err
	}
	for _, p := range o.Params {
		if p.Grad != nil && p.Grad.DType() != p.Value.DType() {
			return fmt.Errorf("nn: AdamW: the guarded update takes gradients in their parameters' dtype; %s has a %v gradient (autograd's SetGradDType): use Step", p.Name, p.Grad.DType())
		}
	}
	return tensor.Try(func() {
		for _, p := range o.Params {
			if p.Grad != nil && p.RequiresGrad() {
				if _, ok := o.m[p]; !ok && tensor.Capturing(p.Value.Device()) {
					panic(&tensor.OpError{Op: "nn.AdamW", Msg: fmt.Sprintf("parameter %s has no moments yet, and making them inside a captured graph would zero them at every replay: take one step before capturing", p.Name), Err: tensor.ErrArgument})
				}
			}
		}
		us := o.updates()
		if len(us) > 1 || len(us) == 1 && us[0].step != o.step+1 {
			panic(&tensor.OpError{Op: "nn.AdamW", Msg: "the guarded update takes every parameter at the optimizer's step (PrepareGuarded's bias corrections); some have been updated fewer times: use Step", Err: tensor.ErrArgument})
		}
		o.guarded = nil
		for _, u := range us {
			o.guarded = u.pp
			tensor.AdamWStepsGuarded(u.ps, u.gs, u.ms, u.vs, u.wds, a, guard)
		}
	})
}
