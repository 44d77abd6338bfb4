package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"
)

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
			err = fmt.Errorf("step %d: %w", it+1, err)
			if errors.As(err, new(noUpdateError)) { // the steps trained are intact: save them
				err = r.rescue(at, err, math.NaN())
			}
			return at, false, err
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
	if err == nil { // a failed step is not done: a state saved now draws its batch again
		r.tr.dataPos = s.rng
	}
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
