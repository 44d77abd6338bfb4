package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/strata-ml/strata/internal/cli"
)

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
		if !early {
			r.dropStaleState()
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

// dropStaleState removes -state when it holds a state of this run from
// before its last step (saved by -save-every, or the interrupted state it
// resumed, flags changed or not): the run is complete, its weights are in
// -out, and the file made the next run at that -state fail as if an
// interrupted run were there to continue (checkStateKept). Another run's
// state, or a file that is not a state, is left.
func (r *trainRun) dropStaleState() {
	o := r.o
	if o.state == "" {
		return
	}
	step, steps, run, ok := interruptedState(o.state)
	if !ok {
		return
	}
	resumed := o.resume != "" && cli.SamePath(o.resume, o.state)
	if mine, err := json.Marshal(identity(o, r.tr)); !resumed && (err != nil || string(mine) != run) {
		return
	}
	if err := os.Remove(o.state); err != nil {
		fmt.Fprintf(os.Stderr, "train-gpt: the run is complete, but its training state saved after step %d could not be removed: %v\n", step, err)
		return
	}
	fmt.Fprintf(os.Stderr, "train-gpt: removed -state %s (saved after step %d of %d): the run is complete\n", o.state, step, steps)
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
		covers = fmt.Sprintf(" (steps %d to %d only: %s, and no -loss-log has the earlier steps)", from, last, hist.gap)
	}
	if err := r.in.write("writing the loss curves to "+o.lossPlot, "-loss-plot", func(ctx context.Context) error {
		return writeLossPlotFn(ctx, o.lossPlot, title, hist)
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "saved the loss curves to %s%s\n", o.lossPlot, covers)
	return nil
}
