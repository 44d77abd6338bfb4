package main

import (
	"fmt"
	"os"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// -cuda-graph: the training step captured once into a CUDA graph and
// replayed (tensor.CaptureGraph). Steps run as usual until AdamW has
// taken one (which makes its moments: the first step, or under fp16 the
// first the gradient scaler does not skip); the next is captured: forward, backward, the
// gradient norm and clip on the device (nn.ClipGradNormGuarded), the
// update reading its learning rate and bias corrections from memory
// (AdamW.StepGuarded), the gradients released; under the fp16 gradient
// scaler backward starts from a tensor holding the loss scale and the
// gradients are unscaled on the device (StepGuard.Unscale). Every step
// from then on copies its batch into the graph's input tensors, writes
// the step's constants (AdamW.PrepareGuarded; the scale and its inverse),
// replays the graph and reads the loss, the norm and the overflow flag
// (StepGuard.Result), which the scaler takes as from its own Unscale
// (GradScaler.Record). The numbers are the ordinary step's, bit
// for bit; a loss or norm that is not finite stops the run before the
// update, as it does without the graph.

// graphStep is the captured step and what it reads and reports through.
type graphStep struct {
	g     *tensor.Graph
	guard *tensor.StepGuard
	args  *tensor.AdamWArgs
	x, y  *tensor.Tensor // the inputs the graph reads, refilled each step
	// seed is backward's starting gradient under the fp16 gradient
	// scaler (the loss scale, refilled each step); nil without.
	seed *tensor.Tensor
}

// graphUse decides -cuda-graph for a run on dev: whether to capture, and
// when not under auto, why (an error under on).
func (o *options) graphUse(dev tensor.Device, dropout float64) (bool, error) {
	why := ""
	switch {
	case o.graph == "off":
		return false, nil
	case o.memTrace != "" || o.memPlot != "":
		why = "-memory-trace and -memory-plot record the allocations of a step, and a graph's replay makes none"
	case dev.Kind() != tensor.KindCUDA:
		why = "CUDA graphs need a CUDA device"
	case dropout > 0:
		why = "dropout's seeds are kernel arguments, which a graph replays unchanged"
	case o.budgetOn():
		why = "the placement under -device-budget moves tensors between steps"
	case o.ckptOff:
		why = "checkpoint offload moves activations between tiers on the copy stream while the step runs"
	case o.overlapOpt || o.pipelineOpt:
		why = "the overlapped and pipelined updates run on the side stream"
	case o.gradDType == "bf16":
		why = "the captured clipping and update take float32 gradients (-grad-dtype bf16)"
	case o.dataParallel():
		why = "-gpus averages gradients between the backward pass and the update"
	}
	if why == "" {
		return true, nil
	}
	if o.graph == "on" {
		return false, fmt.Errorf("-cuda-graph on: %s", why)
	}
	return false, nil
}

// release frees the graph and its blocks.
func (g *graphStep) release() {
	if g == nil {
		return
	}
	if g.g != nil {
		_ = g.g.Release()
	}
	g.guard.Release()
	g.args.Release()
	for _, t := range []*tensor.Tensor{g.x, g.y, g.seed} {
		if t != nil {
			t.Release()
		}
	}
}

// newGraphStep allocates the guard, the constants and the input tensors.
func (t *trainer) newGraphStep() (*graphStep, error) {
	gs := &graphStep{}
	var err error
	if gs.guard, err = tensor.NewStepGuard(t.dev); err == nil {
		if gs.args, err = tensor.NewAdamWArgs(t.dev); err == nil {
			if gs.x, err = tensor.NewKept(t.dev, tensor.Int32, memory.RoleStaging, t.B, t.T); err == nil {
				gs.y, err = tensor.NewKept(t.dev, tensor.Int32, memory.RoleStaging, t.B, t.T)
			}
		}
	}
	if err == nil && t.scaler.Enabled() {
		gs.seed, err = tensor.NewKept(t.dev, tensor.Float32, memory.RoleGradient)
	}
	if err != nil {
		gs.release()
		return nil, err
	}
	return gs, nil
}

// capture records the step into gs.g.
func (t *trainer) capture(gs *graphStep) error {
	var stepErr error
	g, err := tensor.CaptureGraph(t.dev, func() {
		t.c.WithScope(func() {
			x, y := t.c.Adopt(gs.x.Alias()), t.c.Adopt(gs.y.Alias())
			var l *autograd.Var
			amp.With(t.c, t.prec, func() { l = t.model.Loss(x, y) })
			if gs.seed != nil { // the fp16 scaler: backward from the loss scale, unscaled on the device
				stepErr = l.BackwardWith(t.c.Adopt(gs.seed.Alias()))
			} else {
				stepErr = l.Backward()
			}
			if stepErr != nil {
				return
			}
			if gs.seed != nil {
				gs.guard.Unscale(grads(t.params))
			}
			if stepErr = nn.ClipGradNormGuarded(t.params, l.Value, t.maxNorm(), gs.guard); stepErr != nil {
				return
			}
			if stepErr = t.opt.StepGuarded(gs.args, gs.guard); stepErr != nil {
				return
			}
			nn.ZeroGrad(t.params)
		})
	})
	if err == nil && stepErr != nil {
		_ = g.Release()
		err = stepErr
	}
	if err != nil {
		// Nothing of the capture ran: gradients it left attached hold no
		// values (and memory of its discarded pool).
		nn.ZeroGrad(t.params)
		return fmt.Errorf("capturing the training step into a CUDA graph (-cuda-graph off runs without): %w", err)
	}
	gs.g = g
	fmt.Fprintf(os.Stderr, "captured the training step into a CUDA graph: %d kernels replayed by one launch a step\n", g.Kernels())
	return nil
}

// graphStepOn runs step it through the graph, capturing it first.
func (t *trainer) graphStepOn(it int, s *slot) (loss float64, err error) {
	gs := t.graph
	t.mark(phaseStart)
	if e := tensor.Try(func() {
		t.c.WithScope(func() {
			x, y := t.batchInputs(s)
			gs.x.CopyFrom(x)
			gs.y.CopyFrom(y)
		})
		if gs.seed != nil {
			gs.seed.Fill(t.scaler.LossScale())
		}
	}); e != nil {
		return 0, e
	}
	if gs.seed != nil {
		if err := gs.guard.SetUnscale(1 / t.scaler.LossScale()); err != nil {
			return 0, err
		}
	}
	if gs.g == nil {
		if err := t.capture(gs); err != nil {
			if t.graphAuto {
				// -cuda-graph auto: say why and go on without.
				fmt.Fprintf(os.Stderr, "%v\ncontinuing without a CUDA graph\n", err)
				gs.release()
				t.graph = nil
				return t.stepOn(it, s)
			}
			return 0, err
		}
	}
	t.opt.SetLR(t.sched.LR(it))
	if err := t.opt.PrepareGuarded(gs.args); err != nil {
		return 0, err
	}
	if err := gs.g.Launch(); err != nil {
		return 0, err
	}
	t.mark(phaseGraph)
	r, err := gs.guard.Result()
	t.mark(phaseLossRead)
	if err != nil {
		return 0, err
	}
	return r.Loss, t.graphResult(r)
}

// graphResult ends a replayed step on what its guard reported, as stepOn
// ends an eager one: the optimizer counts the update unless the guard
// skipped it; an fp16 overflow is the scaler's skipped step (Update backs
// off, -max-skips counts it); a loss or norm that is not finite stops the
// run and the scaler forgets the step (AbortStep in stepOn: not a good
// step toward GrowthInterval); only a step that updated is a good one.
func (t *trainer) graphResult(r tensor.StepResult) error {
	t.opt.CommitGuarded(r.Skipped)
	if r.Overflow { // fp16: the scaler skipped the step, as Unscale would have
		t.scaler.Record(true)
		t.scaler.Update()
		return t.skipped(r.Loss)
	}
	if r.Skipped || !finite(r.Loss) || !finite(r.Norm) {
		return notFinite(r.Loss, r.Norm)
	}
	t.scaler.Record(false)
	t.scaler.Update()
	t.skips = 0
	return nil
}
