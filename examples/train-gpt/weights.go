package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/strata-ml/strata/nn"
)

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
