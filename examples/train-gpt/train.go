package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainer holds a model, its optimizer and its step function. Its steps
// run in a context of their own (tensor.Ctx), in the precision -precision
// asks for (the autocast state of every forward pass, and a gradient
// scaler that is a no-op except for fp16).
type trainer struct {
	model  *nn.GPT
	params []*nn.Parameter
	opt    *nn.AdamW
	sched  nn.CosineSchedule
	clip   float64
	dev    tensor.Device
	B, T   int
	xs, ys []int32
	// dataTokens is -data's training and held-out token counts and
	// dataSHA256 the hash of its bytes (the run's identity, resume.go);
	// nil and "" for the addition task.
	dataTokens []int
	dataSHA256 string
	c          *tensor.Ctx
	prec       amp.State
	scaler     *amp.GradScaler

	// The data generator (a PCG, whose state the training state saves).
	dataSrc *rand.PCG
	rng     *rand.Rand
	// dataPos is the generator's state after the last batch trained on
	// (what the training state saves); nil: dataSrc's own (no loader).
	dataPos []byte
	// skips counts the steps in a row the gradient scaler skipped;
	// maxSkips of them stop the run.
	skips, maxSkips int
	// placer runs the placement scheduler under -device-budget (nil
	// without) and, under -checkpoint auto, chooses the model's
	// checkpointing level (nn.Placement); showPlan prints its plans
	// (placement.go).
	placer   *nn.Placement
	showPlan bool
	// timer, when set (-bench), marks the phases of every step on the
	// device's queue (phases.go).
	timer *tensor.Timer
	// Data-parallel training (-gpus, dataparallel.go): dp, on the main
	// trainer, runs every step on the ranks; a rank's trainer calls sync
	// after the backward pass (averaging the gradients) and steps altOpt
	// (-zero1's sharded AdamW), when set, in place of opt.
	dp     *dataParallel
	sync   func() error
	altOpt nn.Optimizer
	// graph, under -cuda-graph, is the captured step (graph.go), used
	// from the second step on; graphAuto: -cuda-graph auto, which goes on
	// without the graph when the capture fails.
	graph     *graphStep
	graphAuto bool
}

// newTrainer makes the model and optimizer for batches of o.batch rows of
// T tokens.
func newTrainer(o *options, cfg nn.GPTConfig, dev tensor.Device, T int) (*trainer, error) {
	rng := rand.New(rand.NewPCG(o.seed, 0x5EED))
	model, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rng})
	if err != nil {
		return nil, err
	}
	if o.gradDType == "bf16" {
		if err := model.SetBlockGradDType(tensor.BFloat16); err != nil {
			nn.Release(model.Parameters())
			return nil, err
		}
	}
	model.Checkpoint = nn.Checkpointing{Mode: o.ckptMode, Every: o.ckptEvery, Offload: o.ckptOff, OffloadKeep: offloadKeep(o.keepN), KeepWide: o.wideN}
	if o.head == "auto" {
		// On the GPU the fused head is faster (its GEMMs get the padded
		// vocabulary) and holds a chunk of logits instead of all of them;
		// on the CPU the full one is as fast and simpler to inspect.
		o.headLoss = nn.HeadLoss{Fused: dev.Kind() == tensor.KindCUDA}
	}
	model.HeadLoss = o.headLoss
	if o.attention == "auto" {
		o.attn = nn.AutoAttention(dev, o.prec.Enabled || o.prec.TF32, cfg.Width/cfg.Heads)
	}
	model.SetAttention(o.attn)
	ps := model.Parameters()
	opt := nn.NewAdamW(ps, o.lr, o.wd)
	opt.Beta2 = 0.95
	opt.Overlap = o.overlapOpt
	opt.Pipeline, opt.PipelineWidth = o.pipelineOpt, o.pipelineWidth
	if o.pipelineOpt && o.budget != "" {
		// Under a budget AdamW's moments go to host memory, and the
		// pipelined update moves them through a copy ring whose slots
		// are held against the budget: made now, while it has room (off
		// with STRATA_PIPELINE_RING=0).
		if err := tensor.PreparePipelineRing(dev); err != nil {
			fmt.Fprintf(os.Stderr, "no copy ring for the pipelined update (%s): %v; its kernel reads the moments over the bus\n", tensor.EnvPipelineRing, err)
		}
	}
	B := o.batch
	src := rand.NewPCG(o.seed, 0xDA7A)
	var placer *nn.Placement
	if o.sched != nil {
		if placer, err = nn.NewPlacement(o.sched, &model.Checkpoint, o.placementConfig(model)); err != nil {
			nn.Release(ps)
			return nil, err
		}
	}
	t := &trainer{
		model: model, params: ps, opt: opt, clip: o.clip, dev: dev, B: B, T: T,
		c: tensor.NewCtx(), prec: o.prec, scaler: amp.ScalerFor(o.prec),
		sched: nn.CosineSchedule{Warmup: o.warmup, Total: o.steps, MaxLR: o.lr, MinLR: o.minLR},
		xs:    make([]int32, B*T), ys: make([]int32, B*T),
		dataSrc: src, rng: rand.New(src), maxSkips: max(1, o.maxSkips),
		placer: placer, showPlan: o.placementPlan,
	}
	useGraph, err := o.graphUse(dev, cfg.Dropout)
	if err == nil && useGraph {
		t.graph, err = t.newGraphStep()
		t.graphAuto = o.graph == "auto"
	}
	if err != nil {
		t.release()
		return nil, err
	}
	return t, nil
}

// release frees the model and the optimizer state.
func (t *trainer) release() {
	t.stopDataParallel()
	t.graph.release()
	t.graph = nil
	t.opt.Release()
	nn.Release(t.params)
}

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
		return fmt.Errorf("the fp16 gradient scaler skipped %d steps in a row for overflowing gradients (loss scale now %g, loss %.4g): stopping (-max-skips)", t.skips, t.scaler.LossScale(), loss)
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
	return fmt.Errorf("loss %v, gradient norm %v: not finite; stopped before the optimizer update, so the weights are those of the step before (lower -lr, or check the data)", loss, norm)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func train(o *options, cfg nn.GPTConfig, dev tensor.Device, in *interrupts) error {
	var data dataset
	var task *additionTask
	var err error
	if o.data != "" {
		data, err = loadTokens(o.data, o.tok, cfg.Context, o.hostBudget)
	} else {
		task, err = newAdditionTask(o.digits)
		data = task
	}
	if err != nil {
		return err
	}
	T, err := data.seqLen(cfg.Context)
	if err != nil {
		return err
	}
	tr, err := newTrainer(o, cfg, dev, T)
	if err != nil {
		return err
	}
	defer tr.release()
	if td, ok := data.(*tokenData); ok {
		tr.dataTokens, tr.dataSHA256 = []int{len(td.train), len(td.test)}, td.sha256
	}
	if o.init != "" {
		// A training state is refused with the flags (checkFiles); again
		// here for callers that skip them, with the model's heads.
		if err := checkInit(o.init, &cfg, o.config); err != nil {
			return err
		}
		if _, err := nn.LoadWeights(o.init, tr.params); err != nil {
			if errors.Is(err, tensor.ErrShape) { // names or shapes: not a truncated or corrupt file
				return fmt.Errorf("-init %s: %w (the model here is -config %s, vocabulary %d: the file's shapes must be its own)", o.init, err, o.config, cfg.Vocab)
			}
			return fmt.Errorf("-init %s: %w", o.init, err)
		}
		fmt.Fprintf(os.Stderr, "initial weights from %s\n", o.init)
	}
	done, smooth := 0, 0.0 // steps done, smoothed loss
	evalDue := math.NaN()  // a resumed state's step whose evaluation failed: its loss
	var hist lossHistory   // what -loss-plot draws: a resumed state's, then each step's
	if o.resume != "" {
		if done, smooth, evalDue, err = tr.restoreState(o.resume, o, &hist); err != nil {
			return err
		}
		if done < o.steps {
			fmt.Fprintf(os.Stderr, "resumed from %s after step %d of %d\n", o.resume, done, o.steps)
		} else if o.out == "" {
			return &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-resume %s: the run is at step %d, -steps %d leaves nothing to train, and there is no -out to write its weights to (raise -steps, or give -out)", o.resume, done, o.steps)}
		}
		if len(o.fromSaved) > 0 {
			fmt.Fprintf(os.Stderr, "train-gpt: -resume: the flags not given are the saved run's: %s\n", strings.Join(o.fromSaved, " "))
		}
	}
	// A state of a complete run (-save-every dividing -steps, or saved by
	// a failure at the end): its weights are written, nothing trained.
	complete := done >= o.steps
	if err := tr.startDataParallel(o, cfg); err != nil { // -gpus: the ranks, from these weights
		return err
	}
	fmt.Fprintf(os.Stderr, "model: %d parameters (%d layers, %d heads, width %d, context %d, vocabulary %d); batch %d x %d tokens; %v; checkpointing %s; data: %s; tokenizer %s\n",
		nn.CountParams(tr.params), cfg.Layers, cfg.Heads, cfg.Width, cfg.Context, cfg.Vocab, tr.B, tr.T, o.prec, describeCheckpoint(o), data.describe(), o.tokName)
	var lossLog io.WriteCloser // closed, and its error checked, after the last step
	if o.lossLog != "" {
		if done > 0 && hist.first() > 1 { // a state that holds no loss history: the log's
			var logged lossHistory
			if err := logged.load(o.lossLog, done); err != nil {
				return err
			}
			if logged.first() < hist.first() {
				hist = logged
			}
		}
		f, err := openLossLog(in, o.lossLog, done)
		if err != nil {
			return err
		}
		lossLog = wrapOutput(f)
		defer func() {
			if lossLog == nil {
				return
			}
			// A run that stops early (an interrupt, an error): the run's
			// status stands, but a failed close is not dropped.
			if err := lossLog.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "train-gpt: -loss-log %s: %v\n", o.lossLog, err)
			}
		}()
	}
	logLine := func(step int, loss, held float64) error {
		hist.add(step, loss, held)
		if lossLog == nil {
			return nil
		}
		var err error
		l := "null" // a step the fp16 scaler skipped, its loss not finite: JSON has no NaN
		if finite(loss) {
			l = fmt.Sprintf("%.9g", loss)
		}
		if math.IsNaN(held) {
			_, err = fmt.Fprintf(lossLog, "{\"step\": %d, \"loss\": %s}\n", step, l)
		} else {
			_, err = fmt.Fprintf(lossLog, "{\"step\": %d, \"loss\": %s, \"held_out_loss\": %.9g}\n", step, l, held)
		}
		if err != nil {
			return fmt.Errorf("-loss-log %s: %w", o.lossLog, err)
		}
		return nil
	}
	if !math.IsNaN(evalDue) {
		// The evaluation of the state's last step failed (its state was
		// saved then): done now, logged as the run would have.
		metric, held, err := evaluateFn(tr, data, task)
		if err != nil {
			return fmt.Errorf("step %d, evaluation: %w", done, err)
		}
		if err := logLine(done, evalDue, held); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "step %5d  loss %.4f  %s  lr %.2e\n", done, smooth, metric, tr.sched.LR(done-1))
	}
	if tr.dataPos, err = tr.dataSrc.MarshalBinary(); err != nil {
		return err
	}
	ld, err := startLoader(tr, data)
	if err != nil {
		return err
	}
	defer func() {
		if ld != nil {
			ld.stop()
		}
	}()
	prog := newProgress(o, done)
	training := "finishing the step, then saving the training state to " + o.state
	if o.state == "" {
		training = "finishing the step, then quitting without saving (no -state)"
	}
	lastStep := "finishing the last step, then saving the weights to " + o.out + " (the run is then complete)"
	final := "finishing the run: saving the weights to " + o.out
	if o.out == "" {
		lastStep = "finishing the last step; the run is then complete (no -out: no weights to save)"
		final = "finishing the run (no -out: no weights to save)"
	}
	if s, ok := in.received(); ok {
		return in.exit(s, fmt.Sprintf("%v before the first step: stopped without training or saving anything", s))
	}
	in.setNote(training)
	savedAt := 0 // the step of the last training state saved
	save := func(step int, extra map[string]string) error {
		in.saving.Store(true)
		defer in.saving.Store(false)
		if o.stopSaving == step {
			in.trigger(syscall.SIGINT)
			in.triggerAgain(syscall.SIGINT)
		}
		upTo := step
		if _, ok := extra[keyEvalDue]; ok {
			upTo-- // the resumed run logs the step again, with its evaluation
		}
		meta := hist.metadata(upTo)
		maps.Copy(meta, extra)
		if err := tr.saveState(in.ctx, o.state, o, step, smooth, meta); err != nil {
			return in.abandoned(fmt.Errorf("saving the training state after step %d: %w", step, err), fmt.Sprintf("saving the training state after step %d", step))
		}
		savedAt = step
		return nil
	}
	// rescue is the error of a failure after step at (an evaluation, the
	// end's samples or weights), which would lose the run's work: it saves
	// the training state first, and says where (or why it could not).
	// evalDue: the step's loss when its evaluation failed (the resumed run
	// evaluates it), else NaN.
	rescue := func(at int, cause error, evalDue float64) error {
		var ex *cli.ExitError
		if errors.As(cause, &ex) || at <= done {
			return cause // an interrupt's; or nothing trained here: the state resumed is the run's
		}
		how := "continue the run with -resume " + o.state
		if at >= o.steps {
			how = "-resume " + o.state + " writes its weights"
		}
		switch {
		case o.state == "":
			return fmt.Errorf("%w (no -state: the %d steps trained are lost)", cause, at)
		case savedAt == at && math.IsNaN(evalDue):
			return fmt.Errorf("%w; the training state after step %d is saved in %s: %s", cause, at, o.state, how)
		}
		var extra map[string]string
		if !math.IsNaN(evalDue) {
			extra = map[string]string{keyEvalDue: strconv.FormatFloat(evalDue, 'g', -1, 64)}
		}
		if err := save(at, extra); err != nil {
			if errors.As(err, &ex) {
				return err
			}
			return fmt.Errorf("%w; the training state could not be saved either: %v", cause, err)
		}
		return fmt.Errorf("%w; saved the training state after step %d to %s: %s", cause, at, o.state, how)
	}
	start := time.Now()
	tokens := 0
	smoothed := done > 0 // smooth holds a loss: the resumed run's
	at := done           // the last step done
	early := false       // -max-time ended the run short of -steps
	for it := done; it < o.steps; it++ {
		if it == o.steps-1 {
			in.setNote(lastStep) // a signal now finds the run complete: its weights are saved
		}
		s, err := ld.next()
		if err != nil {
			return fmt.Errorf("step %d: %w", it+1, err)
		}
		loss, err := tr.stepOn(it, s)
		tr.dataPos = s.rng
		ld.put(s) // the step has returned: its batch may be overwritten
		if err != nil {
			return fmt.Errorf("step %d: %w", it+1, err)
		}
		at = it + 1
		tokens += tr.B * tr.T
		// A step the fp16 gradient scaler skipped for a forward pass that
		// overflowed has a non-finite loss (any other stops the run): it
		// is left out of the mean, which would stay NaN.
		if finite(loss) {
			if !smoothed {
				smooth, smoothed = loss, true
			}
			smooth = 0.95*smooth + 0.05*loss
		}
		el := time.Since(start).Seconds()
		timeUp := it < o.steps-1 && o.maxTime > 0 && time.Since(start) > o.maxTime
		last := it == o.steps-1 || timeUp
		held, metric := math.NaN(), ""
		// Not at a -max-time stop: the run resumed from there logs what the
		// uninterrupted run does.
		if o.evalEvery > 0 && (it+1)%o.evalEvery == 0 || it == o.steps-1 {
			prog.clear()
			if metric, held, err = evaluateFn(tr, data, task); err != nil {
				return rescue(it+1, fmt.Errorf("step %d, evaluation: %w", it+1, err), loss)
			}
		}
		if err := logLine(it+1, loss, held); err != nil {
			// A full disk under -loss-log must not lose the steps
			// trained: save the state (elsewhere, it may fit). An
			// evaluated step's line is logged again by the resumed run
			// (keyEvalDue); another's is missing from the log.
			prog.clear()
			due := math.NaN()
			if !math.IsNaN(held) {
				due = loss
			}
			return rescue(it+1, err, due)
		}
		if metric != "" {
			fmt.Fprintf(os.Stderr, "step %5d  loss %.4f  %s  lr %.2e  %.0f tok/s  %.0fs\n", it+1, smooth, metric, tr.sched.LR(it), float64(tokens)/el, el)
		}
		prog.update(it+1, smooth, float64(tokens)/el)
		saved := false
		if o.saveEvery > 0 && (it+1)%o.saveEvery == 0 {
			if err := save(it+1, nil); err != nil {
				return err
			}
			saved = true
		}
		if timeUp {
			// The run ends here, short of -steps: its state, as an
			// interrupt's, lets -resume train the rest.
			prog.clear()
			msg := fmt.Sprintf("-max-time %v reached after step %d of %d", o.maxTime, it+1, o.steps)
			if o.state != "" && !saved {
				if err := save(it+1, nil); err != nil {
					return err
				}
				saved = true
			}
			if saved {
				msg += fmt.Sprintf("; saved the training state to %s: continue the run with -resume %s", o.state, o.state)
			}
			fmt.Fprintln(os.Stderr, "train-gpt:", msg)
		}
		if o.stopAt == it+1 {
			in.trigger(syscall.SIGINT)
		}
		// A signal during the last step finds the run complete: it saves
		// the weights below, as the state would leave nothing to resume.
		if s, ok := in.received(); ok && !last {
			prog.clear()
			if o.state == "" {
				return in.exit(s, fmt.Sprintf("%v after step %d of %d: stopped without saving the training state (no -state)", s, it+1, o.steps))
			}
			if !saved {
				if err := save(it+1, nil); err != nil {
					return err
				}
			}
			return in.exit(s, fmt.Sprintf("%v after step %d of %d: saved the training state to %s; continue the run with -resume %s", s, it+1, o.steps, o.state, o.state))
		}
		if last {
			early = timeUp
			break
		}
	}
	in.setNote(final)
	prog.finish()
	ld.stop()
	ld = nil
	if lossLog != nil {
		err := lossLog.Close()
		lossLog = nil
		if err != nil {
			return rescue(at, fmt.Errorf("-loss-log %s: %w", o.lossLog, err), math.NaN())
		}
	}
	if !complete { // a complete state's samples were shown by its run
		if err := showSamples(tr, data, task, o, in.received); err != nil {
			return rescue(at, fmt.Errorf("after step %d, samples: %w", at, err), math.NaN())
		}
		fmt.Fprint(os.Stderr, "\n", dev.Memory().Summary())
	}
	if o.out != "" {
		if err := saveWeights(in, o, cfg, tr); err != nil {
			var bad *badWeightsError
			if errors.As(err, &bad) {
				return err
			}
			return rescue(at, err, math.NaN())
		}
		if complete {
			fmt.Fprintf(os.Stderr, "train-gpt: nothing left to train: wrote the weights of step %d to %s\n", done, o.out)
		}
	}
	if o.lossPlot != "" && len(hist.train) > 0 {
		on := fmt.Sprintf("%d-digit addition", o.digits)
		if o.data != "" {
			on = fmt.Sprintf("%s (-tokenizer %s)", filepath.Base(o.data), o.tokName)
		}
		last := int(hist.train[len(hist.train)-1].X)
		title := fmt.Sprintf("train-gpt -config %s on %s, %d steps", o.config, on, last)
		covers := ""
		if from := hist.first(); from > 1 {
			title = fmt.Sprintf("train-gpt -config %s on %s, steps %d to %d", o.config, on, from, last)
			covers = fmt.Sprintf(" (steps %d to %d only: the training state resumed holds no loss history, as states saved by an older train-gpt, and no -loss-log has the earlier steps)", from, last)
		}
		if err := in.write("writing the loss curves to "+o.lossPlot, "-loss-plot", func(ctx context.Context) error {
			return writeLossPlotFn(ctx, o.lossPlot, title, &hist)
		}); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "saved the loss curves to %s%s\n", o.lossPlot, covers)
	}
	if s, ok := in.received(); ok {
		if early { // the state saved at the stop (if any) holds the rest
			rest := "no training state saved (no -state)"
			if o.state != "" {
				rest = fmt.Sprintf("continue the run with -resume %s", o.state)
			}
			return in.exit(s, fmt.Sprintf("%v after -max-time stopped the run at step %d of %d: %s", s, at, o.steps, rest))
		}
		return in.exit(s, fmt.Sprintf("%v after the last step: the run is complete", s))
	}
	return nil
}

// badWeightsError is saveWeights' refusal of weights that are not finite
// (the run went wrong: its state is not worth saving either).
type badWeightsError struct{ msg string }

func (e *badWeightsError) Error() string { return e.msg }

// saveWeights writes -out, unless a weight is not finite (a run that went
// wrong must not replace good weights). Its metadata records the model's
// config, the tokenizer and, for the addition task, -digits (generate
// reads them).
func saveWeights(in *interrupts, o *options, cfg nn.GPTConfig, tr *trainer) error {
	bad, err := nn.NonFinite(tr.params)
	if err != nil {
		return err
	}
	if bad != "" {
		return &badWeightsError{fmt.Sprintf("not saving -out %s: parameter %s is not finite", o.out, bad)}
	}
	meta := map[string]string{"format": "pt", "config": fmt.Sprintf("%+v", cfg), "producer": "strata train-gpt", "tokenizer": o.tokName}
	if o.data == "" {
		meta["digits"] = strconv.Itoa(o.digits)
	}
	in.saving.Store(true)
	defer in.saving.Store(false)
	// A second signal lets this save finish (interrupts.finishing): no
	// training state is saved after the last step, so abandoning it
	// would lose the run.
	doing := "saving the weights to " + o.out
	in.finishing.Store(&doing)
	defer in.finishing.Store(nil)
	if in.stopWriting == "-out" {
		in.trigger(syscall.SIGINT)
		in.triggerAgain(syscall.SIGINT)
	}
	if err := saveWeightsFile(in.ctx, o.out, tr.params, meta); err != nil {
		return in.abandoned(err, doing)
	}
	fmt.Fprintf(os.Stderr, "saved weights to %s\n", o.out)
	return nil
}

// saveWeightsFile writes -out (tests: a failing write).
var saveWeightsFile = nn.SaveWeightsContext

// writeLossPlotFn is writeLossPlot (tests: what is plotted).
var writeLossPlotFn = writeLossPlot

// evaluateFn is evaluate (tests: a failing evaluation).
var evaluateFn = evaluate

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

// describeCheckpoint says which blocks -checkpoint and -checkpoint-every
// checkpoint.
func describeCheckpoint(o *options) string {
	switch {
	case o.ckptAuto:
		return "auto (none until a step does not fit the device budget; then the level the placement measures fastest)"
	case o.ckptMode == nn.CheckpointNone:
		return "off"
	}
	s := fmt.Sprintf("%v, every %d blocks", o.ckptMode, o.ckptEvery)
	if o.ckptEvery == 1 {
		s = fmt.Sprintf("%v, every block", o.ckptMode)
	}
	if o.ckptOff {
		s += ", offloaded to host memory between the passes"
	}
	return s
}

// offloadKeep maps -checkpoint-offload-keep (0: none) to
// nn.Checkpointing.OffloadKeep (0: the default, negative: none).
func offloadKeep(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// placementConfig is the placement's: the checkpointing level chosen with
// -checkpoint auto, the offload's keep with -checkpoint-offload-keep auto,
// the wide products kept with -checkpoint-keep-wide auto.
func (o *options) placementConfig(model *nn.GPT) nn.PlacementConfig {
	cfg := nn.PlacementConfig{Auto: o.ckptAuto, Log: placementLog{}}
	if o.keepAuto {
		cfg.OffloadRegions = model.OffloadRegions
	}
	if o.wideAuto {
		cfg.WideRegions = model.WideRegions
	}
	return cfg
}
