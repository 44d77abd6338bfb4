package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// Every flag is checked before any work: a bad value is refused in the
// first second with one line naming the flag and what it accepts, never
// after hours of training (or, worse, accepted and trained on: -lr NaN
// used to train for its whole length and save weights that were all NaN).

// checkExplicit refuses values set on the command line that mean nothing:
// 0 where 0 would silently become the job's default (-steps, -batch).
// It runs before setDefaults fills the unset ones.
func (o *options) checkExplicit(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case err != nil:
		case f.Name == "steps" && o.steps == 0:
			err = fmt.Errorf("-steps 0: want at least 1 (leave -steps out for the job's default)")
		case f.Name == "batch" && o.batch == 0:
			err = fmt.Errorf("-batch 0: want at least 1 (leave -batch out for the config's default)")
		case f.Name == "dropout" && !(o.dropout >= 0 && o.dropout < 1):
			err = fmt.Errorf("-dropout %v: want a number in [0, 1)", o.dropout)
		case f.Name == "dropout":
			o.dropSet = true
		case f.Name == "device-budget" && o.budget != "" && !o.budgetOff() && !o.budgetOn():
			if _, perr := memory.ParseBudget(o.budget, 1<<40); perr == nil { // else checkBudget names the forms
				err = fmt.Errorf("-device-budget %s: want a size such as 4GiB, a share such as 50%%, or off for no budget", o.budget)
			}
		}
	})
	return err
}

// checkIgnored refuses flags set on the command line that the job would
// ignore: -data and the training flags under -bench and the memory
// captures (they time random tokens at a constant learning rate and save
// nothing), -steps and -bench-warmup under the memory captures (they run
// -memory-step steps), -digits with -data (the addition task's), a
// non-zero -sample without -data (text's). It runs
// after -bench is set for the memory captures. An empty value (-out=) asks
// for nothing and is no conflict.
func (o *options) checkIgnored(fs *flag.FlagSet) error {
	capture := o.memTrace != "" || o.memPlot != ""
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch n := f.Name; {
		case err != nil || f.Value.String() == "":
		case n == "data" && o.bench:
			err = fmt.Errorf("-data: not with -bench, -memory-trace or -memory-plot, which time steps on random tokens")
		case o.bench && slices.Contains(trainingFlags, n):
			err = fmt.Errorf("-%s: a training flag; not with -bench, -memory-trace or -memory-plot, which time steps on random tokens at a constant learning rate and save nothing", n)
		case capture && (n == "steps" || n == "bench-warmup"):
			err = fmt.Errorf("-%s: not with -memory-trace or -memory-plot, which run -memory-step steps", n)
		case n == "digits" && o.data != "":
			err = fmt.Errorf("-digits %d: the built-in addition task's; not with -data", o.digits)
		case n == "sample" && o.data == "" && o.sample > 0:
			err = fmt.Errorf("-sample %d: samples text of -data; the built-in addition task reports held-out answers instead", o.sample)
		case n == "progress-every" && o.quiet && o.progressEvery > 0:
			err = fmt.Errorf("-progress-every %v: not with -quiet, which prints no progress lines (leave one of them out)", o.progressEvery)
		case n == "bench-warmup" && !o.bench:
			err = fmt.Errorf("-bench-warmup %d: the warm-up steps of -bench; only with -bench", o.benchWarm)
		case n == "memory-step" && !capture:
			err = fmt.Errorf("-memory-step %d: the step -memory-trace and -memory-plot record; only with one of them", o.memStep)
		case n == "tokenizer" && o.bench:
			err = fmt.Errorf("-tokenizer %s: tokenizes -data; not with -bench, -memory-trace or -memory-plot, which time steps on random tokens", o.tokName)
		case n == "max-skips" && o.precision != "fp16":
			err = fmt.Errorf("-max-skips %d: counts the steps the fp16 gradient scaler skips; only with -precision fp16, not %s", o.maxSkips, o.precision)
		case n == "placement-plan" && o.placementPlan && !o.budgetOn():
			err = fmt.Errorf("-placement-plan: prints the placement scheduler's plans, which run only under -device-budget (a size or a share)")
		}
	})
	return err
}

// budgetOn reports whether -device-budget asks for a budget: a size or a
// share (a share resolves against the device's memory later; any is more
// than 0). budgetOff reports its explicit "no budget" words.
func (o *options) budgetOn() bool {
	n, err := memory.ParseBudget(o.budget, 1<<40)
	return o.budget != "" && err == nil && n > 0
}

func (o *options) budgetOff() bool {
	b := strings.ToLower(strings.TrimSpace(o.budget))
	return b == "off" || b == "none"
}

// trainingFlags are the flags of a training run that -bench and the
// memory captures ignore.
var trainingFlags = []string{"digits", "warmup", "min-lr", "eval-every", "sample", "max-time", "progress-every",
	"out", "loss-log", "loss-plot", "state", "save-every"}

// check validates every numeric flag (after setDefaults) and the names of
// the -config and -policy values.
func (o *options) check() error {
	switch {
	case o.steps < 0:
		return fmt.Errorf("-steps %d: want at least 1", o.steps)
	case o.batch < 0:
		return fmt.Errorf("-batch %d: want at least 1", o.batch)
	case !finite(o.lr) || o.lr <= 0:
		return fmt.Errorf("-lr %v: want a finite number > 0", o.lr)
	case !finite(o.minLR) || o.minLR < 0 || o.minLR > o.lr:
		return fmt.Errorf("-min-lr %v: want a number in [0, -lr %v]", o.minLR, o.lr)
	case !finite(o.wd) || o.wd < 0:
		return fmt.Errorf("-weight-decay %v: want a finite number >= 0", o.wd)
	case !finite(o.clip) || o.clip < 0:
		return fmt.Errorf("-clip %v: want a finite number > 0, or 0 for no clipping", o.clip)
	case o.warmup < 0:
		return fmt.Errorf("-warmup %d: want 0 or more", o.warmup)
	case o.benchWarm < 0:
		return fmt.Errorf("-bench-warmup %d: want 0 or more", o.benchWarm)
	case o.evalEvery < 0:
		return fmt.Errorf("-eval-every %d: want 0 (only at the end) or more", o.evalEvery)
	case o.sample < 0:
		return fmt.Errorf("-sample %d: want 0 (no sample) or more", o.sample)
	case o.maxTime < 0:
		return fmt.Errorf("-max-time %v: want 0 (no limit) or more", o.maxTime)
	case o.memStep < 1:
		return fmt.Errorf("-memory-step %d: want at least 1", o.memStep)
	case o.saveEvery < 0:
		return fmt.Errorf("-save-every %d: want 0 (only on interrupt) or more", o.saveEvery)
	case o.maxSkips < 1:
		return fmt.Errorf("-max-skips %d: want at least 1", o.maxSkips)
	case o.vocab < 0:
		return fmt.Errorf("-vocab %d: want 0 (the config's) or more", o.vocab)
	case o.progressEvery < 0:
		return fmt.Errorf("-progress-every %v: want 0 (no progress lines) or more", o.progressEvery)
	case o.data == "" && (o.digits < 1 || o.digits > 6):
		return fmt.Errorf("-digits %d: want 1 to 6", o.digits)
	}
	if _, err := nn.LookupGPTConfig(o.config); err != nil {
		return fmt.Errorf("-config %q: want one of %s", o.config, strings.Join(nn.GPTConfigNames(), ", "))
	}
	switch o.policy {
	case "hybrid", "device", "managed", "staging":
	default:
		return fmt.Errorf("-policy %q: want hybrid, device, managed or staging", o.policy)
	}
	if o.resume != "" && (o.bench || o.memTrace != "" || o.memPlot != "") {
		return fmt.Errorf("-resume continues training: not with -bench, -memory-trace or -memory-plot")
	}
	if o.init != "" && o.resume != "" {
		return fmt.Errorf("-init %s: not with -resume (the training state holds the weights)", o.init)
	}
	if o.init != "" && (o.bench || o.memTrace != "" || o.memPlot != "") {
		return fmt.Errorf("-init starts training from weights: not with -bench, -memory-trace or -memory-plot")
	}
	if o.saveEvery > 0 && o.state == "" {
		return fmt.Errorf("-save-every %d: needs -state (where to save)", o.saveEvery)
	}
	return nil
}

// takenFromResume is what a message about the file of flag name adds when
// -resume took it from the saved run (resumeFlags) rather than the command
// line: a state copied to another machine, or a run whose directory was
// moved, names paths that are gone there, and the user, who gave none of
// them, was told of a missing -data or an unwritable -out with no word of
// where it came from or how to give another. "" for a path given.
func (o *options) takenFromResume(name string) string {
	for _, f := range o.fromSaved {
		if strings.HasPrefix(f, "-"+name+" ") {
			return fmt.Sprintf(" (the saved run's -%s, taken by -resume %s: give -%s to use another)", name, o.resume, name)
		}
	}
	return ""
}

// checkFiles checks, before any work, that the files the job reads exist
// and that the files it writes can be written, without creating or
// truncating any of them: an existing output keeps its contents until
// the job replaces it (atomically) at the end.
func (o *options) checkFiles() error {
	if o.data != "" && !o.bench && o.memTrace == "" && o.memPlot == "" {
		if err := cli.Readable(o.data); err != nil {
			return fmt.Errorf("-data: %w%s", err, o.takenFromResume("data"))
		}
	}
	if o.resume != "" {
		if err := cli.Readable(o.resume); err != nil {
			return fmt.Errorf("-resume: %w", err)
		}
		if err := checkResumeIsState(o.resume); err != nil {
			return err
		}
	}
	if o.init != "" {
		if err := cli.Readable(o.init); err != nil {
			return fmt.Errorf("-init: %w", err)
		}
		if err := checkInit(o.init, nil, ""); err != nil {
			return err
		}
	}
	if err := o.checkStateKept(); err != nil {
		return err
	}
	var outs [][2]string // flag, path
	switch {
	case o.memTrace != "" || o.memPlot != "":
		if o.memTrace != "" {
			outs = append(outs, [2]string{"-memory-trace", o.memTrace}, [2]string{"-memory-trace", strings.TrimSuffix(o.memTrace, ".json") + ".snapshot.json"})
		}
		if o.memPlot != "" {
			outs = append(outs, [2]string{"-memory-plot", o.memPlot}, [2]string{"-memory-plot", strings.TrimSuffix(o.memPlot, ".png") + "-segments.png"})
		}
	case o.bench:
	default:
		outs = append(outs, [2]string{"-out", o.out}, [2]string{"-loss-log", o.lossLog}, [2]string{"-state", o.state}, [2]string{"-loss-plot", o.lossPlot})
	}
	if o.cpuProfile != "" {
		outs = append(outs, [2]string{"-cpuprofile", o.cpuProfile})
	}
	var ins [][2]string // flag, path: what the job reads
	if !o.bench {
		ins = append(ins, [2]string{"-data", o.data}, [2]string{"-resume", o.resume}, [2]string{"-init", o.init})
	}
	for i, fp := range outs {
		if fp[1] == "" {
			continue
		}
		if err := atomicfile.CheckWritable(fp[1]); err != nil {
			return fmt.Errorf("%s: %w%s", fp[0], err, o.takenFromResume(strings.TrimPrefix(fp[0], "-")))
		}
		// No output may replace an input or another output; but the
		// state may replace the state it resumed, and -out the weights
		// -init started from (each once the run has made the new one).
		for _, in := range ins {
			allowed := fp[0] == "-state" && in[0] == "-resume" || fp[0] == "-out" && in[0] == "-init"
			if in[1] != "" && !allowed && cli.SamePath(fp[1], in[1]) {
				return fmt.Errorf("%s %s: would overwrite %s", fp[0], fp[1], in[0])
			}
		}
		for _, prev := range outs[:i] {
			if prev[1] != "" && cli.SamePath(fp[1], prev[1]) {
				return fmt.Errorf("%s %s: the same file as %s", fp[0], fp[1], prev[0])
			}
		}
		// Nor may any but -state (checkStateKept) replace an interrupted
		// run's training state: -loss-log and -cpuprofile truncate theirs
		// at the start, -out replaces its at the end, and a name mistyped
		// for another file lost the steps the state held with no word.
		if fp[0] != "-state" {
			if step, steps, _, ok := interruptedState(fp[1]); ok {
				return fmt.Errorf("%s %s%s: holds an interrupted run's training state (step %d of %d), which this run's %s would replace: continue that run with -resume %s, or give %s another file",
					fp[0], fp[1], o.takenFromResume(strings.TrimPrefix(fp[0], "-")), step, steps, fp[0], fp[1], fp[0])
			}
		}
	}
	return nil
}

// vocabHint says how to make the model's vocabulary hold -tokenizer's
// ids: a larger -vocab, or leaving -vocab out when the -config's own
// holds them, or else the first preset that holds them.
func (o *options) vocabHint() string {
	if o.resume != "" {
		// The state's model and data are its run's: another -config,
		// -vocab or -tokenizer is refused once it is read (compareRuns),
		// so the hints below led from one refusal to the next.
		return fmt.Sprintf("-resume %s continues its run's model and tokenizer: leave -tokenizer and -vocab out", o.resume)
	}
	need := o.tok.VocabSize()
	var fit []string
	for _, name := range nn.GPTConfigNames() {
		if c, err := nn.LookupGPTConfig(name); err == nil && c.Vocab >= need {
			fit = append(fit, "-config "+name)
		}
	}
	own, _ := nn.LookupGPTConfig(o.config)
	switch {
	case o.vocab > 0 && own.Vocab >= need:
		return fmt.Sprintf("use -vocab %d or more, or leave -vocab out (-config %s has %d)", need, o.config, own.Vocab)
	case o.vocab > 0 || len(fit) == 0:
		return fmt.Sprintf("use -vocab %d or more", need)
	}
	return fmt.Sprintf("use %s, or -vocab %d or more", fit[0], need)
}

// checkBatch refuses a -batch whose tokens a step cannot be held: B rows
// of T tokens (the addition task's problem length, else the -config's
// context) whose count overflows an int, or whose token ids and targets
// (an int32 each, 8 bytes a token, before any activation) pass the host
// memory budget (o.hostBudget: memory.DefaultHostBudget, the CPU
// device's). Without it, -batch 1e12 died of a fatal out-of-memory
// error with pages of goroutine stacks, and -batch 2^63-1 of a makeslice
// panic. An unset -batch (0 here) is the config's, which fits.
func (o *options) checkBatch() error {
	if o.batch <= 0 {
		return nil
	}
	cfg, err := nn.LookupGPTConfig(o.config)
	if err != nil {
		return nil // check refuses the name
	}
	T := cfg.Context
	if !o.bench && o.data == "" {
		if a, err := newAdditionTask(o.digits); err == nil {
			T = min(T, a.rowLen())
		}
	}
	const bytesPerToken = 8 // the int32 ids and targets
	if T <= 0 {
		return nil
	}
	if o.batch > math.MaxInt/T || o.batch*T > math.MaxInt64/bytesPerToken {
		return fmt.Errorf("-batch %d: %d tokens a row make more tokens a step than an int holds: use a smaller -batch", o.batch, T)
	}
	tokens := int64(o.batch) * int64(T)
	need := tokens * bytesPerToken
	if b := o.hostBudget; b != nil && need > b.Limit() {
		return fmt.Errorf("-batch %d: %d tokens a step need %s for their ids and targets alone, more than the %s: use a smaller -batch",
			o.batch, tokens, memory.FormatBytes(need), b)
	}
	return nil
}

// checkVocab refuses a -vocab whose token embedding cannot be made: ids
// past what int32 holds (the batches' token ids are int32: such ids could
// never be named), or weights whose initialisation passes the host memory
// budget (o.hostBudget): nn.NewGPT draws every weight on the host as a
// float64, 8 bytes an element, on every device, before the weights' own
// memory. Without it, -vocab 2^63-1 failed after the run began with a
// shape error naming no flag, and with no budget -vocab 2^31-1 died of a
// fatal out-of-memory error with pages of goroutine stacks. An unset
// -vocab (0) is the config's, which fits.
func (o *options) checkVocab() error {
	if o.vocab <= 0 {
		return nil
	}
	if o.vocab > math.MaxInt32 {
		return fmt.Errorf("-vocab %d: more than the %d ids int32 token ids can name: use a smaller -vocab", o.vocab, math.MaxInt32)
	}
	cfg, err := nn.LookupGPTConfig(o.config)
	if err != nil {
		return nil // check refuses the name
	}
	const drawBytes = 8 // a float64 per element, drawn on the host
	need := int64(o.vocab) * int64(cfg.Width) * drawBytes
	if b := o.hostBudget; b != nil && need > b.Limit() {
		return fmt.Errorf("-vocab %d: the token embedding's %d x %d weights are drawn on the host at %d bytes each: %s, more than the %s: use a smaller -vocab",
			o.vocab, o.vocab, cfg.Width, drawBytes, memory.FormatBytes(need), b)
	}
	return nil
}

// checkInit reads an -init file's header once and refuses a training
// state (-state's file: -resume continues it) and, given the model's cfg
// (its -config named by config), weights whose metadata config (strata's
// files record it) has another number of attention heads: the tensor
// shapes cannot tell heads apart, so the weights would load and attention
// would split them into other heads, a different model with no error
// (generate refuses the same file). Files without the metadata (nanoGPT's,
// Hugging Face's) and headers it cannot read are left to the load.
func checkInit(path string, cfg *nn.GPTConfig, config string) error {
	info, err := nn.ReadWeightsInfo(path)
	if err != nil {
		return nil
	}
	if step := info.Metadata[keyStep]; step != "" || info.TrainState {
		after := ""
		if step != "" {
			after = " (after step " + step + ")"
		}
		return fmt.Errorf("-init %s: a training state%s, not weights: continue it with -resume", path, after)
	}
	if cfg == nil {
		return nil
	}
	saved, fromMeta, err := info.Config()
	if err != nil || !fromMeta || saved.Heads == cfg.Heads {
		return nil
	}
	return fmt.Errorf("-init %s: the file's metadata has %d attention heads, the model here (-config %s) %d: the same weights split into other heads are another model: %w",
		path, saved.Heads, config, cfg.Heads, tensor.ErrShape)
}

// checkStateKept refuses a run whose -state holds an interrupted run's
// training state: the run's first save (an interrupt, -save-every) would
// replace it, and the steps it holds would be lost with no word. A new
// run (no -resume) is refused; so is a resumed one whose -state is not
// the file it resumed (-resume A -state B, B another run's state), unless
// the file holds a state of the same run (the same identity) at no later
// step than the one resumed, whose steps the resumed run keeps. A state
// of a complete run, or a file that is not a train-gpt state, is left to
// be replaced.
func (o *options) checkStateKept() error {
	if o.state == "" || o.bench || o.memTrace != "" || o.memPlot != "" {
		return nil
	}
	if o.resume != "" && cli.SamePath(o.state, o.resume) {
		return nil // replaced by the run's own continuation
	}
	step, steps, run, ok := interruptedState(o.state)
	if !ok {
		return nil
	}
	if o.resume == "" {
		return fmt.Errorf("-state %s: holds an interrupted run's training state (step %d of %d), which this new run would replace: continue it with -resume %s, or give this run another -state (or remove the file)", o.state, step, steps, o.state)
	}
	if meta, err := tensor.ReadSafetensorsMetadata(o.resume); err == nil {
		if from, err := strconv.Atoi(meta[keyStep]); err == nil && meta[keyRun] == run && step <= from {
			return nil
		}
	}
	return fmt.Errorf("-state %s%s: holds an interrupted run's training state (step %d of %d), which the run resumed from -resume %s would replace: continue that run with -resume %s, or give this one another -state (or remove the file)",
		o.state, o.takenFromResume("state"), step, steps, o.resume, o.state)
}

// interruptedState reads the header of the training state at path: the
// step it was saved after, its run's -steps and its run's identity (the
// metadata's JSON), and ok when the run was interrupted (its step before
// -steps). A file that is not a train-gpt state is not ok.
func interruptedState(path string) (step, steps int, run string, ok bool) {
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() { // a pipe would block: CheckWritable refuses it
		return 0, 0, "", false
	}
	meta, err := tensor.ReadSafetensorsMetadata(path)
	if err != nil {
		return 0, 0, "", false
	}
	var id runIdentity
	step, err = strconv.Atoi(meta[keyStep])
	if err != nil || json.Unmarshal([]byte(meta[keyRun]), &id) != nil || step >= id.Steps {
		return 0, 0, "", false
	}
	return step, id.Steps, meta[keyRun], true
}
