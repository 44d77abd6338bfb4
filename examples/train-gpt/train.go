package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

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

// writeLossPlotFn is writeLossPlot (tests: what is plotted).
var writeLossPlotFn = writeLossPlot

// evaluateFn is evaluate (tests: a failing evaluation).
var evaluateFn = evaluate
