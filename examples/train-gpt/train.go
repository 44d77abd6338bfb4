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

// writeLossPlotFn is writeLossPlot (tests: what is plotted).
var writeLossPlotFn = writeLossPlot

// evaluateFn is evaluate (tests: a failing evaluation).
var evaluateFn = evaluate
