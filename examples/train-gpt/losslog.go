package main

import (
	"fmt"
	"math"
	"os"
)

// startLossLog opens -loss-log (none: nothing) for this run's steps. A
// resumed state that lacks the first steps' losses (saved by an older
// train-gpt, or trimmed to maxSavedLosses steps) takes the log's earlier
// steps for -loss-plot, when the log has more of them.
func (r *trainRun) startLossLog() error {
	o := r.o
	if o.lossLog == "" {
		return nil
	}
	if r.done > 0 && r.hist.first() > 1 { // a state without the first steps' losses: the log's
		var logged lossHistory
		if err := logged.load(o.lossLog, r.done); err != nil {
			return err
		}
		if logged.first() < r.hist.first() {
			logged.gap = r.hist.gap // the log may lack the first steps too: the state's reason stands
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
