package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"syscall"

	"github.com/strata-ml/strata/internal/cli"
)

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
