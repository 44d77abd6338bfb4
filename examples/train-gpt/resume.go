package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// The training state (-state, -save-every, -resume) is everything a run
// needs to continue bit for bit where it stopped: the weights and AdamW's
// moments and step (nn.SaveTrainState), and in the metadata the number of
// steps done, the position of the data generator (its PCG state: the
// data position of both tasks is a function of it), the position of the
// dropout stream of the trainer's context, the gradient scaler's state,
// the steps skipped in a row, and the flags that define the run. The
// learning rate schedule is a function of the step. It is one safetensors
// file, written atomically: PyTorch's safetensors.torch.load_file reads
// it (the weights under nanoGPT's names, the moments under
// optimizer.exp_avg.* and optimizer.exp_avg_sq.*).
const (
	keyStep       = "train.step"
	keyDataRNG    = "train.data_rng"
	keyDropoutRNG = "train.dropout_rng"
	keySkips      = "train.skips_in_a_row"
	keySmooth     = "train.smooth_loss"
	keyRun        = "train.run"
	// keyEvalDue: the state was saved because the evaluation of its last
	// step failed; the step's loss, which the resumed run logs with the
	// held-out loss of that evaluation, done first.
	keyEvalDue = "train.eval_due_loss"
	// keyOutputs: the run's outputs and the flags of its own that are no
	// part of its identity (runOutputs), which a -resume that does not
	// give them takes (absent in states saved before it was recorded).
	keyOutputs = "train.outputs"
)

// runOutputs is where a run writes and how often, recorded in its
// training state so that a -resume that does not give these flags
// continues the run with them (resumeFlags). Paths are absolute ("" for
// none): a run resumed from another directory writes where it did.
type runOutputs struct {
	Out       filePath `json:"out"`
	State     filePath `json:"state"`
	LossLog   filePath `json:"loss_log"`
	LossPlot  filePath `json:"loss_plot"`
	EvalEvery int      `json:"eval_every"`
	SaveEvery int      `json:"save_every"`
	Sample    int      `json:"sample"`
	MaxSkips  int      `json:"max_skips"`
}

// filePath is a path recorded in the training state's JSON: a string,
// or, for one that is not valid UTF-8 (a file name is bytes), an object
// {"bytes": base64} that keeps its bytes (a string would have U+FFFD in
// place of the bad ones: another file).
type filePath string

func (p filePath) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(p)) {
		return json.Marshal(string(p))
	}
	return json.Marshal(struct {
		Bytes []byte `json:"bytes"`
	}{[]byte(p)})
}

func (p *filePath) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*p = filePath(s)
		return nil
	}
	var raw struct {
		Bytes []byte `json:"bytes"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*p = filePath(raw.Bytes)
	return nil
}

func outputs(o *options) runOutputs {
	abs := func(p string) filePath {
		if p == "" {
			return ""
		}
		if a, err := filepath.Abs(p); err == nil {
			return filePath(a)
		}
		return filePath(p)
	}
	return runOutputs{Out: abs(o.out), State: abs(o.state), LossLog: abs(o.lossLog), LossPlot: abs(o.lossPlot),
		EvalEvery: o.evalEvery, SaveEvery: o.saveEvery, Sample: o.sample, MaxSkips: o.maxSkips}
}

// resumeFlags gives the flags of a -resume run that the command line does
// not set the values of the run the state saved, read from its header
// before any default is applied: the run's identity (runIdentity: -config,
// -data or -digits, -tokenizer, -vocab, -batch, -seed), its schedule and
// precision (-steps, -lr, -min-lr, -warmup, -weight-decay, -clip,
// -dropout, -precision) and its outputs (runOutputs: -out, -state,
// -loss-log, -loss-plot, -eval-every, -save-every, -sample, -max-skips),
// so that "-resume FILE" alone continues the run exactly. A flag given
// keeps its value (restoreState notes one that differs from the saved
// run's), but -seed, which is the saved run's (noted as ignored). A key a
// state saved by an older train-gpt lacks leaves its flags to their
// defaults, as before; a header that cannot be read is left for
// checkFiles and the load to report. -attention and the device's flags
// are not taken: auto chooses for the device the run is resumed on. The
// flags taken are listed in o.fromSaved for the message of the resumed
// run; they count as set for the defaults that follow (setDefaults,
// setStateDefault, setLossPlotDefault).
func (o *options) resumeFlags(fs *flag.FlagSet) error {
	if o.resume == "" || o.bench || o.memTrace != "" || o.memPlot != "" {
		return nil // check refuses -resume with these
	}
	if cli.Readable(o.resume) != nil {
		return nil
	}
	meta, err := tensor.ReadSafetensorsMetadata(o.resume)
	if err != nil {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	take := func(name, v string) error {
		if set[name] {
			return nil
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("-resume %s: the saved run's -%s %q: %w", o.resume, name, v, err)
		}
		shown := v
		if v == "" || strings.ContainsAny(v, " \t\n'\"") {
			shown = strconv.Quote(v)
		}
		o.fromSaved = append(o.fromSaved, "-"+name+" "+shown)
		return nil
	}
	ftoa := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	var s runIdentity
	var keys map[string]json.RawMessage // the keys the state has: an older one's lack some
	if r := meta[keyRun]; r != "" && json.Unmarshal([]byte(r), &s) == nil && json.Unmarshal([]byte(r), &keys) == nil {
		has := func(k string) bool { _, ok := keys[k]; return ok }
		var vals [][2]string
		if s.Config != "" {
			vals = append(vals, [2]string{"config", s.Config})
		}
		// -data or -digits given says which task (compareRuns refuses
		// another); else the saved run's.
		if !set["data"] && !set["digits"] && has("data") {
			if s.Data != "" {
				vals = append(vals, [2]string{"data", string(s.Data)})
			} else if s.Digits > 0 {
				vals = append(vals, [2]string{"digits", strconv.Itoa(s.Digits)})
			}
		}
		if s.Tokenizer != "" {
			vals = append(vals, [2]string{"tokenizer", s.Tokenizer})
		}
		if s.Batch > 0 {
			vals = append(vals, [2]string{"batch", strconv.Itoa(s.Batch)})
		}
		if s.Steps > 0 {
			vals = append(vals, [2]string{"steps", strconv.Itoa(s.Steps)})
		}
		if s.LR > 0 {
			vals = append(vals, [2]string{"lr", ftoa(s.LR)})
		}
		for _, v := range [][3]string{{"warmup", "warmup", strconv.Itoa(s.Warmup)}, {"weight_decay", "weight-decay", ftoa(s.WD)},
			{"clip", "clip", ftoa(s.Clip)}, {"dropout", "dropout", ftoa(s.Dropout)}, {"seed", "seed", strconv.FormatUint(s.Seed, 10)}} {
			if has(v[0]) {
				vals = append(vals, [2]string{v[1], v[2]})
			}
		}
		// -seed is the saved run's even when given: the model draws its
		// dropout seeds from it when it is built, before the state is
		// read. One given that differs is noted as ignored (restoreState).
		if has("seed") && set["seed"] && o.seed != s.Seed {
			given := o.seed
			o.seedGiven, o.seed = &given, s.Seed
		}
		if s.Precision != "" {
			vals = append(vals, [2]string{"precision", s.Precision})
		}
		if s.GradDType != "" {
			vals = append(vals, [2]string{"grad-dtype", s.GradDType})
		}
		for _, v := range vals {
			if err := take(v[0], v[1]); err != nil {
				return err
			}
		}
		// -min-lr after -lr: one above a new -lr given is not taken (its
		// default, -lr/10, is; restoreState notes the change).
		if has("min_lr") && !(set["lr"] && s.MinLR > o.lr) {
			if err := take("min-lr", ftoa(s.MinLR)); err != nil {
				return err
			}
		}
		// -vocab after -config: only a vocabulary other than the config's.
		if cfg, err := nn.LookupGPTConfig(o.config); s.Vocab > 0 && (err != nil || cfg.Vocab != s.Vocab) {
			if err := take("vocab", strconv.Itoa(s.Vocab)); err != nil {
				return err
			}
		}
	}
	var out runOutputs
	if r := meta[keyOutputs]; r != "" && json.Unmarshal([]byte(r), &out) == nil {
		plot := string(out.LossPlot)
		if plot == "" {
			plot = "off"
		}
		vals := [][2]string{{"out", string(out.Out)}, {"state", string(out.State)}, {"loss-log", string(out.LossLog)}, {"loss-plot", plot},
			{"eval-every", strconv.Itoa(out.EvalEvery)}}
		if out.SaveEvery > 0 && !(set["state"] && o.state == "") {
			vals = append(vals, [2]string{"save-every", strconv.Itoa(out.SaveEvery)})
		}
		if o.data != "" {
			vals = append(vals, [2]string{"sample", strconv.Itoa(out.Sample)}) // text's (checkIgnored)
		}
		if o.precision == "fp16" && out.MaxSkips > 0 {
			vals = append(vals, [2]string{"max-skips", strconv.Itoa(out.MaxSkips)}) // fp16's (checkIgnored)
		}
		for _, v := range vals {
			if err := take(v[0], v[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// runIdentity is what defines a run. A state is resumed only with the
// same config, data, digits and batch (anything else would make its data
// stream or weights meaningless); the other fields may change, with a
// note, and the resumed run is then no longer the saved one.
type runIdentity struct {
	Config string   `json:"config"`
	Data   filePath `json:"data"` // absolute path; "" for the addition task
	// DataTokens is -data's training and held-out token counts: the same
	// path with other contents is other data (nil in states saved before
	// it was recorded, and for the addition task).
	DataTokens []int `json:"data_tokens,omitempty"`
	// DataSHA256 is the SHA-256 of -data's bytes: other contents are other
	// data, the same at another path the same ("" in states saved before
	// it was recorded, and for the addition task).
	DataSHA256 string `json:"data_sha256,omitempty"`
	Digits     int    `json:"digits"`
	Tokenizer  string `json:"tokenizer,omitempty"` // "" in states saved before -tokenizer: byte
	Vocab      int    `json:"vocab,omitempty"`     // the model's; 0 in states saved before -vocab: the config's
	Batch      int    `json:"batch"`
	SeqLen     int    `json:"seq_len"`
	Precision  string `json:"precision"`
	// GradDType is -grad-dtype ("" in states saved before it was
	// recorded: fp32).
	GradDType string  `json:"grad_dtype,omitempty"`
	Attention string  `json:"attention"`
	Dropout   float64 `json:"dropout"`
	Steps     int     `json:"steps"`
	LR        float64 `json:"lr"`
	MinLR     float64 `json:"min_lr"`
	Warmup    int     `json:"warmup"`
	WD        float64 `json:"weight_decay"`
	Clip      float64 `json:"clip"`
	Seed      uint64  `json:"seed"`
}

func identity(o *options, tr *trainer) runIdentity {
	data := ""
	if o.data != "" {
		data, _ = filepath.Abs(o.data)
	}
	digits := o.digits
	if o.data != "" {
		digits = 0
	}
	return runIdentity{Config: o.config, Data: filePath(data), DataTokens: tr.dataTokens, DataSHA256: tr.dataSHA256, Digits: digits, Tokenizer: o.tokName, Vocab: tr.model.Config.Vocab, Batch: tr.B, SeqLen: tr.T,
		Precision: o.precision, GradDType: o.gradDType, Attention: o.attn.String(), Dropout: tr.model.Config.Dropout,
		Steps: o.steps, LR: o.lr, MinLR: o.minLR, Warmup: o.warmup, WD: o.wd, Clip: o.clip, Seed: o.seed}
}

// setStateDefault derives -state from -out when -state is not given:
// gpt.safetensors saves its state to gpt.state.safetensors.
func (o *options) setStateDefault(fs *flag.FlagSet) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "state" })
	if set {
		return
	}
	base := o.out
	if base == "" {
		base = "gpt.safetensors"
	}
	o.state = strings.TrimSuffix(base, ".safetensors") + ".state.safetensors"
}

// saveState writes the training state after step steps (atomically; a
// cancelled ctx leaves the previous file).
func (t *trainer) saveState(ctx context.Context, path string, o *options, step int, smooth float64, extra map[string]string) error {
	rng := t.dataPos // the data loader's generator runs ahead: the position after the last batch trained on
	if rng == nil {
		var err error
		if rng, err = t.dataSrc.MarshalBinary(); err != nil {
			return err
		}
	}
	run, err := json.Marshal(identity(o, t))
	if err != nil {
		return err
	}
	meta := map[string]string{
		"producer": "strata train-gpt", "config": fmt.Sprintf("%+v", t.model.Config),
		keyStep: strconv.Itoa(step), keyDataRNG: base64.StdEncoding.EncodeToString(rng),
		keyDropoutRNG: strconv.FormatUint(autograd.RandomState(t.c), 10),
		keySkips:      strconv.Itoa(t.skips), keySmooth: strconv.FormatFloat(smooth, 'g', -1, 64),
		keyRun: string(run),
	}
	outs, err := json.Marshal(outputs(o))
	if err != nil {
		return err
	}
	meta[keyOutputs] = string(outs)
	for k, v := range t.scaler.Metadata() {
		meta[k] = v
	}
	for k, v := range extra {
		meta[k] = v
	}
	return nn.SaveTrainState(ctx, path, t.params, t.opt, meta)
}

// checkResumeIsState refuses a -resume that is a file of weights (no
// optimizer state, no run recorded: -out's, which -init starts from),
// from its header; a header it cannot read is left for the load to
// report.
func checkResumeIsState(path string) error {
	info, err := nn.ReadWeightsInfo(path)
	if err != nil || info.TrainState || info.Metadata[keyRun] != "" {
		return nil
	}
	return fmt.Errorf("-resume %s: weights, not a training state: start a run from them with -init %s, or give -resume the -state file an interrupted run saved", path, path)
}

// restoreState loads a training state into t and returns the steps it had
// done, its smoothed loss and, when the evaluation of its last step
// failed (keyEvalDue), that step's loss (else NaN); hist gets its loss
// history (losshistory.go). A state at -steps is a
// complete run's (train writes its weights). Differences in the flags that define the
// run are errors or notes (printed), as runIdentity says.
func (t *trainer) restoreState(path string, o *options, hist *lossHistory) (step int, smooth, evalDue float64, err error) {
	evalDue = math.NaN()
	// The metadata first: a state of another run is refused by what
	// differs, not by the first tensor of the wrong shape.
	meta, err := tensor.ReadSafetensorsMetadata(path)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("-resume: %w", err)
	}
	bad := func(key string) error { // bad input: status 2
		return badInput(fmt.Errorf("-resume %s: not a train-gpt training state file (metadata %s = %q)", path, key, meta[key]))
	}
	var saved runIdentity
	if err := json.Unmarshal([]byte(meta[keyRun]), &saved); err != nil {
		return 0, 0, 0, bad(keyRun)
	}
	now := identity(o, t)
	if o.seedGiven != nil { // resumeFlags replaced it by the saved one
		now.Seed = *o.seedGiven
	}
	if err := compareRuns(saved, now, os.Stderr); err != nil {
		// The flags contradict the state: a bad flag (status 2).
		return 0, 0, 0, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-resume %s: %v", path, err)}
	}
	o.seed = saved.Seed // compareRuns noted a new -seed as ignored
	if meta, err = nn.LoadTrainState(path, t.params, t.opt); err != nil {
		return 0, 0, 0, fmt.Errorf("-resume: %w", err)
	}
	if step, err = strconv.Atoi(meta[keyStep]); err != nil || step < 0 {
		return 0, 0, 0, bad(keyStep)
	}
	rng, err := base64.StdEncoding.DecodeString(meta[keyDataRNG])
	if err != nil || t.dataSrc.UnmarshalBinary(rng) != nil {
		return 0, 0, 0, bad(keyDataRNG)
	}
	drop, err := strconv.ParseUint(meta[keyDropoutRNG], 10, 64)
	if err != nil {
		return 0, 0, 0, bad(keyDropoutRNG)
	}
	autograd.SetRandomState(t.c, drop)
	if t.skips, err = strconv.Atoi(meta[keySkips]); err != nil || t.skips < 0 {
		return 0, 0, 0, bad(keySkips)
	}
	if smooth, err = strconv.ParseFloat(meta[keySmooth], 64); err != nil || !finite(smooth) { // a mean of finite losses
		return 0, 0, 0, bad(keySmooth)
	}
	if t.scaler.Enabled() {
		if err := t.scaler.LoadMetadata(meta); err != nil {
			return 0, 0, 0, fmt.Errorf("-resume %s: %w", path, err)
		}
	}
	if v, ok := meta[keyEvalDue]; ok {
		if evalDue, err = strconv.ParseFloat(v, 64); err != nil || !finite(evalDue) || step < 1 {
			return 0, 0, 0, bad(keyEvalDue)
		}
	}
	if err := hist.loadMetadata(meta, step); err != nil {
		return 0, 0, 0, badInput(fmt.Errorf("-resume %s: not a train-gpt training state file (%v)", path, err))
	}
	if step > o.steps { // a bad flag (status 2), as with no -out to write a complete state's weights to
		return 0, 0, 0, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-resume %s: the run is at step %d, -steps %d leaves nothing to train (raise -steps)", path, step, o.steps)}
	}
	return step, smooth, evalDue, nil
}

// compareRuns refuses a state of another run and writes to w a note for
// each setting that changed.
func compareRuns(saved, now runIdentity, w io.Writer) error {
	switch {
	case saved.Config != now.Config:
		return fmt.Errorf("saved by a -config %s run, this one is -config %s", saved.Config, now.Config)
	case (saved.Data == "") != (now.Data == ""):
		return fmt.Errorf("saved by a run on %s, this one trains on %s", dataName(saved), dataName(now))
	case saved.DataSHA256 != "" && saved.DataSHA256 != now.DataSHA256 && saved.Data == now.Data:
		return fmt.Errorf("-data %s has changed since the state was saved: sha256 %s then, %s now", now.Data, short(saved.DataSHA256), short(now.DataSHA256))
	case saved.DataSHA256 != "" && saved.DataSHA256 != now.DataSHA256:
		return fmt.Errorf("-data %s (sha256 %s) is not the data the state was saved with: %s (sha256 %s)", now.Data, short(now.DataSHA256), saved.Data, short(saved.DataSHA256))
	case saved.DataSHA256 == "" && saved.Data != now.Data:
		return fmt.Errorf("saved by a run on -data %s, this one trains on -data %s", saved.Data, now.Data)
	case saved.Digits != now.Digits:
		return fmt.Errorf("saved by a -digits %d run, this one is -digits %d", saved.Digits, now.Digits)
	case cmp.Or(saved.Tokenizer, "byte") != now.Tokenizer:
		return fmt.Errorf("saved by a -tokenizer %s run, this one is -tokenizer %s", cmp.Or(saved.Tokenizer, "byte"), now.Tokenizer)
	case saved.Vocab != 0 && saved.Vocab != now.Vocab:
		return fmt.Errorf("saved by a run with a vocabulary of %d, this one has %d", saved.Vocab, now.Vocab)
	case saved.Batch != now.Batch || saved.SeqLen != now.SeqLen:
		return fmt.Errorf("saved by a run with batches of %d x %d tokens, this one has %d x %d", saved.Batch, saved.SeqLen, now.Batch, now.SeqLen)
	case saved.DataTokens != nil && !slices.Equal(saved.DataTokens, now.DataTokens):
		return fmt.Errorf("-data %s has changed since the state was saved: %v training and held-out tokens then, %v now", now.Data, saved.DataTokens, now.DataTokens)
	}
	switch {
	case saved.Data != "" && saved.DataSHA256 == "":
		fmt.Fprintf(w, "train-gpt: note: the state records no hash of -data (saved by an older train-gpt): only its token counts were compared\n")
	case saved.Data != now.Data:
		fmt.Fprintf(w, "train-gpt: note: -data is %s now, %s in the saved run: the same contents (sha256 %s)\n", now.Data, saved.Data, short(now.DataSHA256))
	}
	// States saved before it was recorded (and callers that leave it unset).
	saved.GradDType, now.GradDType = cmp.Or(saved.GradDType, "fp32"), cmp.Or(now.GradDType, "fp32")
	var a, b map[string]any
	ja, _ := json.Marshal(saved)
	jb, _ := json.Marshal(now)
	json.Unmarshal(ja, &a)
	json.Unmarshal(jb, &b)
	if saved.Seed != now.Seed {
		// The weights are the saved ones and the data's and dropout's
		// generators are restored: the seed changes nothing, and resume
		// keeps the saved one (for the end's sample too).
		fmt.Fprintf(w, "train-gpt: note: -seed %d is ignored: a resumed run continues the saved run's random generators (-seed %d)\n", now.Seed, saved.Seed)
	}
	for k, v := range a {
		if k != "data" && k != "seed" && fmt.Sprint(v) != fmt.Sprint(b[k]) {
			fmt.Fprintf(w, "train-gpt: note: %s is %v now, %v in the saved run; the resumed run follows the new value\n", k, b[k], v)
		}
	}
	return nil
}

// dataName is what a run trains on, for messages.
func dataName(r runIdentity) string {
	if r.Data == "" {
		return fmt.Sprintf("the built-in addition task (-digits %d)", r.Digits)
	}
	return "-data " + string(r.Data)
}

// short is a SHA-256 in hex cut to 16 digits, enough to tell files apart.
func short(sum string) string { return sum[:min(len(sum), 16)] }

// openLossLog opens -loss-log: truncated for a new run; for a run resumed
// after step done, with the lines of later steps (written after the state
// was saved, by a run that then died) dropped, for appending.
func openLossLog(in *interrupts, path string, done int) (*os.File, error) {
	if done == 0 {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("-loss-log: %w", err)
		}
		return f, nil
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("-loss-log: %w", err)
	}
	var kept bytes.Buffer
	loggedSteps(old, done, func(line []byte, _ lossLine) {
		kept.Write(line)
		kept.WriteByte('\n')
	})
	if err := in.write("rewriting -loss-log "+path, "-loss-log", func(ctx context.Context) error {
		return atomicfile.Write(ctx, path, func(w io.Writer) error {
			_, err := w.Write(kept.Bytes())
			return err
		})
	}); err != nil {
		if _, ok := err.(*cli.ExitError); ok {
			return nil, err
		}
		return nil, fmt.Errorf("-loss-log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("-loss-log: %w", err)
	}
	return f, nil
}
