package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainRun is one run of train: the trainer and its data, and what the
// run keeps between its steps. Its methods are train's parts.
type trainRun struct {
	o    *options
	cfg  nn.GPTConfig
	in   *interrupts
	tr   *trainer
	data dataset
	task *additionTask // the addition task; nil with -data

	done     int         // the steps a resumed state had done
	smooth   float64     // the smoothed loss
	smoothed bool        // smooth holds a loss (a resumed run's, or a step's)
	hist     lossHistory // what -loss-plot draws: a resumed state's, then each step's
	// lossLog is -loss-log (nil: none), closed, and its error checked,
	// after the last step.
	lossLog io.WriteCloser
	savedAt int // the step of the last training state saved
}

func train(o *options, cfg nn.GPTConfig, dev tensor.Device, in *interrupts) error {
	data, task, err := loadData(o, cfg)
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
	r := &trainRun{o: o, cfg: cfg, in: in, tr: tr, data: data, task: task}
	if err := r.loadInit(); err != nil {
		return err
	}
	evalDue, err := r.resume() // a resumed state's step whose evaluation failed: its loss
	if err != nil {
		return err
	}
	// A state of a complete run (-save-every dividing -steps, or saved by
	// a failure at the end): its weights are written, nothing trained.
	complete := r.done >= o.steps
	if err := tr.startDataParallel(o, cfg); err != nil { // -gpus: the ranks, from these weights
		return err
	}
	r.describe()
	if err := r.startLossLog(); err != nil {
		return err
	}
	defer r.closeLossLogEarly()
	if !math.IsNaN(evalDue) {
		if err := r.evaluateDue(evalDue); err != nil {
			return err
		}
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
	prog := newProgress(o, r.done)
	training, lastStep, final := signalNotes(o)
	if s, ok := in.received(); ok {
		return in.exit(s, fmt.Sprintf("%v before the first step: stopped without training or saving anything", s))
	}
	in.setNote(training)
	at, early, err := r.trainSteps(ld, prog, lastStep)
	if err != nil {
		return err
	}
	in.setNote(final)
	prog.finish()
	ld.stop()
	ld = nil
	return r.finish(at, early, complete)
}

// loadData is the run's data: -data's tokens, or the addition task (also
// returned as task; nil with -data).
func loadData(o *options, cfg nn.GPTConfig) (data dataset, task *additionTask, err error) {
	if o.data != "" {
		td, err := loadTokens(o.data, o.tok, cfg.Context, o.hostBudget)
		if err != nil {
			return nil, nil, err
		}
		return td, nil, nil
	}
	if task, err = newAdditionTask(o.digits); err != nil {
		return nil, nil, err
	}
	return task, task, nil
}

// loadInit loads -init's weights into the model (no -init: nothing).
func (r *trainRun) loadInit() error {
	o := r.o
	if o.init == "" {
		return nil
	}
	// A training state is refused with the flags (checkFiles); again
	// here for callers that skip them, with the model's heads.
	if err := checkInit(o.init, &r.cfg, o.config); err != nil {
		return err
	}
	if _, err := nn.LoadWeights(o.init, r.tr.params); err != nil {
		if errors.Is(err, tensor.ErrShape) { // names or shapes: not a truncated or corrupt file
			return fmt.Errorf("-init %s: %w (the model here is -config %s, vocabulary %d: the file's shapes must be its own)", o.init, err, o.config, r.cfg.Vocab)
		}
		return fmt.Errorf("-init %s: %w", o.init, err)
	}
	fmt.Fprintf(os.Stderr, "initial weights from %s\n", o.init)
	return nil
}

// resume restores -resume's training state (none: nothing) into r: its
// steps done, smoothed loss and loss history. evalDue is the loss of its
// last step when that step's evaluation failed, else NaN.
func (r *trainRun) resume() (evalDue float64, err error) {
	o := r.o
	if o.resume == "" {
		return math.NaN(), nil
	}
	if r.done, r.smooth, evalDue, err = r.tr.restoreState(o.resume, o, &r.hist); err != nil {
		return evalDue, err
	}
	if r.done < o.steps {
		fmt.Fprintf(os.Stderr, "resumed from %s after step %d of %d\n", o.resume, r.done, o.steps)
	} else if o.out == "" {
		return evalDue, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-resume %s: the run is at step %d, -steps %d leaves nothing to train, and there is no -out to write its weights to (raise -steps, or give -out)", o.resume, r.done, o.steps)}
	}
	if len(o.fromSaved) > 0 {
		fmt.Fprintf(os.Stderr, "train-gpt: -resume: the flags not given are the saved run's: %s\n", strings.Join(o.fromSaved, " "))
	}
	return evalDue, nil
}

// describe prints the model, the batch and the run's settings.
func (r *trainRun) describe() {
	o, cfg, tr := r.o, r.cfg, r.tr
	fmt.Fprintf(os.Stderr, "model: %d parameters (%d layers, %d heads, width %d, context %d, vocabulary %d); batch %d x %d tokens; %v; checkpointing %s; data: %s; tokenizer %s\n",
		nn.CountParams(tr.params), cfg.Layers, cfg.Heads, cfg.Width, cfg.Context, cfg.Vocab, tr.B, tr.T, o.prec, describeCheckpoint(o), r.data.describe(), o.tokName)
}

// startLossLog opens -loss-log (none: nothing) for this run's steps. A
// resumed state that holds no loss history takes the log's earlier steps
// for -loss-plot, when the log has more of them.
func (r *trainRun) startLossLog() error {
	o := r.o
	if o.lossLog == "" {
		return nil
	}
	if r.done > 0 && r.hist.first() > 1 { // a state that holds no loss history: the log's
		var logged lossHistory
		if err := logged.load(o.lossLog, r.done); err != nil {
			return err
		}
		if logged.first() < r.hist.first() {
			r.hist = logged
		}
	}
	f, err := openLossLog(r.in, o.lossLog, r.done)
	if err != nil {
		return err
	}
	r.lossLog = wrapOutput(f)
	return nil
}

// closeLossLogEarly closes -loss-log when the run stops early (an
// interrupt, an error): the run's status stands, but a failed close is
// not dropped.
func (r *trainRun) closeLossLogEarly() {
	if r.lossLog == nil {
		return
	}
	if err := r.lossLog.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "train-gpt: -loss-log %s: %v\n", r.o.lossLog, err)
	}
}

// logStep records a step's loss and held-out loss (NaN: not evaluated)
// for -loss-plot, and writes them to -loss-log.
func (r *trainRun) logStep(step int, loss, held float64) error {
	r.hist.add(step, loss, held)
	if r.lossLog == nil {
		return nil
	}
	var err error
	l := "null" // a step the fp16 scaler skipped, its loss not finite: JSON has no NaN
	if finite(loss) {
		l = fmt.Sprintf("%.9g", loss)
	}
	if math.IsNaN(held) {
		_, err = fmt.Fprintf(r.lossLog, "{\"step\": %d, \"loss\": %s}\n", step, l)
	} else {
		_, err = fmt.Fprintf(r.lossLog, "{\"step\": %d, \"loss\": %s, \"held_out_loss\": %.9g}\n", step, l, held)
	}
	if err != nil {
		return fmt.Errorf("-loss-log %s: %w", r.o.lossLog, err)
	}
	return nil
}

// evaluateDue evaluates the resumed state's last step, whose evaluation
// failed (its state was saved then), and logs it as the run would have;
// loss is the step's loss.
func (r *trainRun) evaluateDue(loss float64) error {
	metric, held, err := evaluateFn(r.tr, r.data, r.task)
	if err != nil {
		return fmt.Errorf("step %d, evaluation: %w", r.done, err)
	}
	if err := r.logStep(r.done, loss, held); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "step %5d  loss %.4f  %s  lr %.2e\n", r.done, r.smooth, metric, r.tr.sched.LR(r.done-1))
	return nil
}

// signalNotes are what a signal says the run does: while it trains,
// during its last step, and once it finishes.
func signalNotes(o *options) (training, lastStep, final string) {
	training = "finishing the step, then saving the training state to " + o.state
	if o.state == "" {
		training = "finishing the step, then quitting without saving (no -state)"
	}
	lastStep = "finishing the last step, then saving the weights to " + o.out + " (the run is then complete)"
	final = "finishing the run: saving the weights to " + o.out
	if o.out == "" {
		lastStep = "finishing the last step; the run is then complete (no -out: no weights to save)"
		final = "finishing the run (no -out: no weights to save)"
	}
	return training, lastStep, final
}

// save writes the training state after step, with the loss history and
// extra's metadata entries.
func (r *trainRun) save(step int, extra map[string]string) error {
	o, in := r.o, r.in
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
	meta := r.hist.metadata(upTo)
	maps.Copy(meta, extra)
	if err := r.tr.saveState(in.ctx, o.state, o, step, r.smooth, meta); err != nil {
		return in.abandoned(fmt.Errorf("saving the training state after step %d: %w", step, err), fmt.Sprintf("saving the training state after step %d", step))
	}
	r.savedAt = step
	return nil
}

// rescue is the error of a failure after step at (an evaluation, the
// end's samples or weights), which would lose the run's work: it saves
// the training state first, and says where (or why it could not).
// evalDue: the step's loss when its evaluation failed (the resumed run
// evaluates it), else NaN.
func (r *trainRun) rescue(at int, cause error, evalDue float64) error {
	o := r.o
	var ex *cli.ExitError
	if errors.As(cause, &ex) || at <= r.done {
		return cause // an interrupt's; or nothing trained here: the state resumed is the run's
	}
	how := "continue the run with -resume " + o.state
	if at >= o.steps {
		how = "-resume " + o.state + " writes its weights"
	}
	switch {
	case o.state == "":
		return fmt.Errorf("%w (no -state: the %d steps trained are lost)", cause, at)
	case r.savedAt == at && math.IsNaN(evalDue):
		return fmt.Errorf("%w; the training state after step %d is saved in %s: %s", cause, at, o.state, how)
	}
	var extra map[string]string
	if !math.IsNaN(evalDue) {
		extra = map[string]string{keyEvalDue: strconv.FormatFloat(evalDue, 'g', -1, 64)}
	}
	if err := r.save(at, extra); err != nil {
		if errors.As(err, &ex) {
			return err
		}
		return fmt.Errorf("%w; the training state could not be saved either: %v", cause, err)
	}
	return fmt.Errorf("%w; saved the training state after step %d to %s: %s", cause, at, o.state, how)
}

// trainSteps trains the steps after r.done up to -steps, on the batches
// of ld, and returns the last step done; early: -max-time ended the run
// short of -steps. A signal between steps (not after the last) saves the
// training state and ends the run with its error.
func (r *trainRun) trainSteps(ld *loader, prog *progress, lastStep string) (at int, early bool, err error) {
	o, tr, in := r.o, r.tr, r.in
	start := time.Now()
	tokens := 0
	r.smoothed = r.done > 0 // smooth holds a loss: the resumed run's
	at = r.done
	for it := r.done; it < o.steps; it++ {
		if it == o.steps-1 {
			in.setNote(lastStep) // a signal now finds the run complete: its weights are saved
		}
		loss, err := r.step(ld, it)
		if err != nil {
			return at, false, fmt.Errorf("step %d: %w", it+1, err)
		}
		at = it + 1
		tokens += tr.B * tr.T
		r.smoothLoss(loss)
		el := time.Since(start).Seconds()
		timeUp := it < o.steps-1 && o.maxTime > 0 && time.Since(start) > o.maxTime
		last := it == o.steps-1 || timeUp
		metric, err := r.evaluateAndLog(it, loss, prog)
		if err != nil {
			return at, false, err
		}
		if metric != "" {
			fmt.Fprintf(os.Stderr, "step %5d  loss %.4f  %s  lr %.2e  %.0f tok/s  %.0fs\n", it+1, r.smooth, metric, tr.sched.LR(it), float64(tokens)/el, el)
		}
		prog.update(it+1, r.smooth, float64(tokens)/el)
		saved := false
		if o.saveEvery > 0 && (it+1)%o.saveEvery == 0 {
			if err := r.save(it+1, nil); err != nil {
				return at, false, err
			}
			saved = true
		}
		if timeUp {
			if saved, err = r.stopForTime(it+1, saved, prog); err != nil {
				return at, false, err
			}
		}
		if o.stopAt == it+1 {
			in.trigger(syscall.SIGINT)
		}
		// A signal during the last step finds the run complete: it saves
		// the weights below, as the state would leave nothing to resume.
		if s, ok := in.received(); ok && !last {
			return at, false, r.stopForSignal(s, it+1, saved, prog)
		}
		if last {
			early = timeUp
			break
		}
	}
	return at, early, nil
}

// step trains step it+1 on the loader's next batch.
func (r *trainRun) step(ld *loader, it int) (float64, error) {
	s, err := ld.next()
	if err != nil {
		return 0, err
	}
	loss, err := r.tr.stepOn(it, s)
	r.tr.dataPos = s.rng
	ld.put(s) // the step has returned: its batch may be overwritten
	return loss, err
}

// smoothLoss folds a step's loss into the smoothed loss. A step the fp16
// gradient scaler skipped for a forward pass that overflowed has a
// non-finite loss (any other stops the run): it is left out of the mean,
// which would stay NaN.
func (r *trainRun) smoothLoss(loss float64) {
	if !finite(loss) {
		return
	}
	if !r.smoothed {
		r.smooth, r.smoothed = loss, true
	}
	r.smooth = 0.95*r.smooth + 0.05*loss
}

// evaluateAndLog evaluates step it+1 when -eval-every (or the last step)
// calls for it, and logs its losses; it returns the evaluation's metric
// ("": not evaluated). A failure saves the training state first
// (rescue).
func (r *trainRun) evaluateAndLog(it int, loss float64, prog *progress) (metric string, err error) {
	o := r.o
	held := math.NaN()
	// Not at a -max-time stop: the run resumed from there logs what the
	// uninterrupted run does.
	if o.evalEvery > 0 && (it+1)%o.evalEvery == 0 || it == o.steps-1 {
		prog.clear()
		if metric, held, err = evaluateFn(r.tr, r.data, r.task); err != nil {
			return "", r.rescue(it+1, fmt.Errorf("step %d, evaluation: %w", it+1, err), loss)
		}
	}
	if err := r.logStep(it+1, loss, held); err != nil {
		// A full disk under -loss-log must not lose the steps
		// trained: save the state (elsewhere, it may fit). An
		// evaluated step's line is logged again by the resumed run
		// (keyEvalDue); another's is missing from the log.
		prog.clear()
		due := math.NaN()
		if !math.IsNaN(held) {
			due = loss
		}
		return "", r.rescue(it+1, err, due)
	}
	return metric, nil
}

// stopForTime ends the run at step, short of -steps, for -max-time: its
// state, as an interrupt's, lets -resume train the rest. saved: the
// state after step is saved already; it returns whether it is now.
func (r *trainRun) stopForTime(step int, saved bool, prog *progress) (bool, error) {
	o := r.o
	prog.clear()
	msg := fmt.Sprintf("-max-time %v reached after step %d of %d", o.maxTime, step, o.steps)
	if o.state != "" && !saved {
		if err := r.save(step, nil); err != nil {
			return saved, err
		}
		saved = true
	}
	if saved {
		msg += fmt.Sprintf("; saved the training state to %s: continue the run with -resume %s", o.state, o.state)
	}
	fmt.Fprintln(os.Stderr, "train-gpt:", msg)
	return saved, nil
}

// stopForSignal ends the run at step for signal s, saving the training
// state unless it is saved already (saved) or there is no -state.
func (r *trainRun) stopForSignal(s syscall.Signal, step int, saved bool, prog *progress) error {
	o, in := r.o, r.in
	prog.clear()
	if o.state == "" {
		return in.exit(s, fmt.Sprintf("%v after step %d of %d: stopped without saving the training state (no -state)", s, step, o.steps))
	}
	if !saved {
		if err := r.save(step, nil); err != nil {
			return err
		}
	}
	return in.exit(s, fmt.Sprintf("%v after step %d of %d: saved the training state to %s; continue the run with -resume %s", s, step, o.steps, o.state, o.state))
}

// finish ends a run whose last step is at (early: stopped by -max-time):
// it closes -loss-log, shows the samples, saves -out and draws
// -loss-plot. A failure that would lose the steps trained saves the
// training state first (rescue). complete: the resumed state was a
// complete run's.
func (r *trainRun) finish(at int, early, complete bool) error {
	o, in := r.o, r.in
	if r.lossLog != nil {
		err := r.lossLog.Close()
		r.lossLog = nil
		if err != nil {
			return r.rescue(at, fmt.Errorf("-loss-log %s: %w", o.lossLog, err), math.NaN())
		}
	}
	if !complete { // a complete state's samples were shown by its run
		if err := showSamples(r.tr, r.data, r.task, o, in.received); err != nil {
			return r.rescue(at, fmt.Errorf("after step %d, samples: %w", at, err), math.NaN())
		}
		fmt.Fprint(os.Stderr, "\n", r.tr.dev.Memory().Summary())
	}
	if o.out != "" {
		if err := saveWeights(in, o, r.cfg, r.tr); err != nil {
			var bad *badWeightsError
			if errors.As(err, &bad) {
				return err
			}
			return r.rescue(at, err, math.NaN())
		}
		if complete {
			fmt.Fprintf(os.Stderr, "train-gpt: nothing left to train: wrote the weights of step %d to %s\n", r.done, o.out)
		}
	}
	if err := r.plotLosses(); err != nil {
		return err
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

// plotLosses draws -loss-plot (none, or no step's loss: nothing), and
// says which steps it covers when it lacks the first ones.
func (r *trainRun) plotLosses() error {
	o, hist := r.o, &r.hist
	if o.lossPlot == "" || len(hist.train) == 0 {
		return nil
	}
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
	if err := r.in.write("writing the loss curves to "+o.lossPlot, "-loss-plot", func(ctx context.Context) error {
		return writeLossPlotFn(ctx, o.lossPlot, title, hist)
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "saved the loss curves to %s%s\n", o.lossPlot, covers)
	return nil
}

// writeLossPlotFn is writeLossPlot (tests: what is plotted).
var writeLossPlotFn = writeLossPlot

// evaluateFn is evaluate (tests: a failing evaluation).
var evaluateFn = evaluate
