// Command generate runs a trained GPT: it continues a prompt (greedy or
// sampled, with a KV cache, streaming the text), measures the addition
// accuracy of a model train-gpt trained, writes logits for checking
// against PyTorch, or converts weights between layouts.
//
//	go run ./examples/generate -weights gpt.safetensors -prompt "123+456="
//	go run ./examples/generate -weights gpt.safetensors -addition 1000
//	go run ./examples/generate -weights model.safetensors -tokenizer gpt2 -prompt "Hello" -max-new 50
//	go run ./examples/generate -weights gpt.safetensors -save gpt-hf.safetensors -save-layout hf
//	go run ./examples/generate -weights gpt.safetensors -prompt "12+34=" -dump-logits logits.json
//
// The weights are strata's, nanoGPT's or Hugging Face's GPT-2
// (safetensors; nn.LoadWeights tells the layout). The model's shape comes
// from the file's metadata when train-gpt or nn.GPT.SaveWeights saved it
// there, else from -config, else from the tensor shapes (the heads from
// -heads, a config.json beside the file, or width/64).
//
// Every flag is checked before any work; a bad one exits with status 2
// and one line naming it, and so does a flag given that the run would
// ignore (generation's with -addition, -save or -dump-logits; -digits
// without -addition; -top-k, -top-p and -seed with -temperature 0;
// -stop-eot with the byte tokenizer). A failure during the run, writing
// the results included, exits with status 1. SIGINT or SIGTERM while
// -save or -dump-logits writes its file abandons the write (its temporary
// file removed, the file there before kept) and exits with 130 or 143.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
	"github.com/strata-ml/strata/tokenizer"
)

type options struct {
	weights     string
	config      string
	heads       int
	layout      string
	prompt      string
	tokenizer   string
	maxNew      int
	temperature float64
	topK        int
	topP        float64
	seed        uint64
	device      string
	stopEOT     bool
	runs        int
	quiet       bool
	addition    int
	digits      int
	dumpLogits  string
	save        string
	saveLayout  string

	lay, saveLay nn.Layout
	// info is -weights' header, read once by check (nn.ReadWeightsInfo):
	// whether it is a training state, the model's shape and the metadata;
	// infoErr is why it could not be read, which run reports.
	info    nn.WeightsInfo
	infoErr error
	// headsGuessed: the heads are width/64 (modelConfig's last resort),
	// not known: -save does not record them as the model's.
	headsGuessed bool
	// set holds the flags the command line gave (flag.FlagSet.Visit):
	// a flag the run would ignore is refused only when given.
	set map[string]bool
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.weights, "weights", "", "the model's weights: a safetensors file of strata (train-gpt -out), nanoGPT or Hugging Face's GPT-2 (required)")
	fs.StringVar(&o.config, "config", "", "model shape when the file's metadata has none: "+strings.Join(nn.GPTConfigNames(), ", ")+" (default: from the tensor shapes)")
	fs.IntVar(&o.heads, "heads", 0, "attention heads when the shape comes from the tensor shapes (default: config.json beside the file, else width/64)")
	fs.StringVar(&o.layout, "layout", "auto", "weights layout: auto, nanogpt or hf")
	fs.StringVar(&o.prompt, "prompt", "\n", "text to continue (and whose logits -dump-logits writes)")
	fs.StringVar(&o.tokenizer, "tokenizer", "", "byte or gpt2 (default: the one the file's metadata names, as train-gpt records it, and no other is accepted then; else byte for a vocabulary of 256, gpt2 for 50257 to 50304)")
	fs.IntVar(&o.maxNew, "max-new", 200, "tokens to generate at most")
	fs.Float64Var(&o.temperature, "temperature", 0.8, "sampling temperature (0: greedy)")
	fs.IntVar(&o.topK, "top-k", 200, "sample among the k most likely tokens (0: all)")
	fs.Float64Var(&o.topP, "top-p", 1, "nucleus sampling: the most likely tokens up to this probability, in (0, 1]")
	fs.Uint64Var(&o.seed, "seed", 1, "sampling seed")
	fs.StringVar(&o.device, "device", "", "cpu, cuda, cuda:N or auto (default: $STRATA_DEVICE, else auto)")
	fs.BoolVar(&o.stopEOT, "stop-eot", true, "stop at the tokenizer's end-of-text token (gpt2's <|endoftext|>)")
	fs.IntVar(&o.runs, "runs", 1, fmt.Sprintf("generate this many times (the same tokens) and report each run's tokens/s: the first run warms up; at most %d: the median of the runs after the first is steady long before that, and a larger count is more likely a typo than a wish", maxRuns))
	fs.BoolVar(&o.quiet, "quiet", false, "do not print the generated text (with -addition: only the accuracy)")
	fs.IntVar(&o.addition, "addition", 0, "answer N distinct held-out problems of train-gpt's addition task greedily and print the accuracy (at most every held-out problem once: 16 for -digits 1)")
	fs.IntVar(&o.digits, "digits", 0, "with -addition: digits per operand (default: the -digits train-gpt recorded in the file's metadata, else 3)")
	fs.StringVar(&o.dumpLogits, "dump-logits", "", "write the prompt's tokens and logits (full forward and KV cache) to this JSON file, for tools/check_gpt2_logits.py")
	fs.StringVar(&o.save, "save", "", "save the loaded weights to this safetensors file in -save-layout")
	fs.StringVar(&o.saveLayout, "save-layout", "hf", "layout of -save: nanogpt or hf")
	if err := cli.ParseFlags(fs, args); err != nil {
		return nil, err // -h: flag.ErrHelp; else a cli.UsageError
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageHint(fs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if err := o.check(); err != nil {
		var ex *cli.ExitError // a signal during the output probes
		if errors.As(err, &ex) {
			return nil, err
		}
		return nil, cli.UsageError{Err: err}
	}
	return o, nil
}

// maxRuns bounds -runs: the runs time generation, and the median of a
// few dozen is already steady; a larger count is a typo (10000000 for
// 10), which would generate for days.
const maxRuns = 1000

// check refuses bad flags before any work.
func (o *options) check() error {
	var err error
	switch {
	case o.weights == "":
		return errors.New("-weights: a safetensors file is required")
	case o.heads < 0:
		return fmt.Errorf("-heads %d: want 0 (infer) or more", o.heads)
	case o.maxNew < 0:
		return fmt.Errorf("-max-new %d: want 0 or more", o.maxNew)
	case math.IsNaN(o.temperature) || math.IsInf(o.temperature, 0) || o.temperature < 0:
		return fmt.Errorf("-temperature %v: want 0 (greedy) or a finite positive number", o.temperature)
	case o.topK < 0:
		return fmt.Errorf("-top-k %d: want 0 (all) or more", o.topK)
	case math.IsNaN(o.topP) || o.topP <= 0 || o.topP > 1:
		return fmt.Errorf("-top-p %v: want a probability in (0, 1]", o.topP)
	case o.runs < 1 || o.runs > maxRuns:
		return fmt.Errorf("-runs %d: want 1 to %d (timing runs: the median of %d after the warm-up is as steady as it gets)", o.runs, maxRuns, maxRuns-1)
	case o.addition < 0:
		return fmt.Errorf("-addition %d: want 0 (off) or a number of problems", o.addition)
	case o.digits < 0 || o.digits > 6:
		return fmt.Errorf("-digits %d: want 1 to 6 (0: the default)", o.digits)
	}
	if err := cli.Readable(o.weights); err != nil { // a pipe is refused unopened: it would block, or be read twice
		return fmt.Errorf("-weights: %w", err)
	}
	o.info, o.infoErr = nn.ReadWeightsInfo(o.weights)
	if o.infoErr == nil && o.info.TrainState {
		return fmt.Errorf("-weights %s: a training state of train-gpt (-state: weights and optimizer moments), not weights: give the weights it saved (-out), or continue the run with train-gpt -resume", o.weights)
	}
	if o.config != "" {
		if _, err := nn.LookupGPTConfig(o.config); err != nil {
			return fmt.Errorf("-config %q: want one of %s", o.config, strings.Join(nn.GPTConfigNames(), ", "))
		}
	}
	if err := cli.CheckDevice(o.device); err != nil {
		return err
	}
	if o.lay, err = nn.ParseLayout(o.layout); err != nil {
		return fmt.Errorf("-layout %q: want auto, nanogpt or hf", o.layout)
	}
	if o.saveLay, err = nn.ParseLayout(o.saveLayout); err != nil || o.saveLay == nn.LayoutAuto {
		return fmt.Errorf("-save-layout %q: want nanogpt or hf", o.saveLayout)
	}
	if o.tokenizer != "" {
		if _, err := tokenizer.New(o.tokenizer); err != nil {
			return fmt.Errorf("-tokenizer %q: want %s", o.tokenizer, strings.Join(tokenizer.Names(), " or "))
		}
	}
	// The probes create and remove a file: a signal waits for them
	// (cli.Interruptible) so as to leave none.
	if err := cli.Interruptible("checking the outputs can be written", func(context.Context) error {
		for _, p := range []struct{ flag, path string }{{"-save", o.save}, {"-dump-logits", o.dumpLogits}} {
			if p.path == "" {
				continue
			}
			if cli.SamePath(p.path, o.weights) { // a link to it too
				return fmt.Errorf("%s %s: would overwrite -weights", p.flag, p.path)
			}
			// Only a missing one: CheckWritable names the others' cause
			// (a file where the directory should be, no permission).
			if _, err := os.Stat(filepath.Dir(p.path)); errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s %s: its directory does not exist", p.flag, p.path)
			}
			if err := atomicfile.CheckWritable(p.path); err != nil {
				return fmt.Errorf("%s: %w", p.flag, err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if o.save != "" && o.dumpLogits != "" && cli.SamePath(o.save, o.dumpLogits) {
		return fmt.Errorf("-dump-logits %s: the same file as -save", o.dumpLogits)
	}
	return o.checkIgnored()
}

// generates reports whether the run generates text: it does unless
// -save, -dump-logits or -addition asks for something else.
func (o *options) generates() bool {
	return o.addition == 0 && o.save == "" && o.dumpLogits == ""
}

// modeFlag names the flag that turned generation off.
func (o *options) modeFlag() string {
	switch {
	case o.addition > 0:
		return "-addition"
	case o.save != "":
		return "-save"
	}
	return "-dump-logits"
}

// checkIgnored refuses a flag given on the command line that the run
// would ignore: the generation's flags when no text is generated
// (-addition answers its problems greedily from their own prompts),
// -prompt unless text is generated or -dump-logits reads it, -quiet with
// neither generation nor -addition, -digits without -addition,
// -save-layout without -save, and sampling's flags with greedy decoding
// (-temperature 0). -stop-eot is checked once the tokenizer is known
// (checkStopEOT).
func (o *options) checkIgnored() error {
	if !o.generates() {
		for _, f := range []string{"temperature", "top-k", "top-p", "seed", "max-new", "runs", "stop-eot"} {
			if o.set[f] {
				return fmt.Errorf("-%s: %s generates no text, and -%s is generation's", f, o.modeFlag(), f)
			}
		}
		if o.set["prompt"] && o.dumpLogits == "" {
			what := "-save generates no text"
			if o.addition > 0 {
				what = "-addition's prompts are its problems"
			}
			return fmt.Errorf("-prompt: %s (-prompt is the text to continue, or the one whose logits -dump-logits writes)", what)
		}
		if o.set["quiet"] && o.addition == 0 {
			return fmt.Errorf("-quiet: %s prints no text (-quiet is for generation and -addition)", o.modeFlag())
		}
	}
	if o.set["digits"] && o.addition == 0 {
		return errors.New("-digits: only with -addition (the digits of its problems)")
	}
	if o.set["save-layout"] && o.save == "" {
		return errors.New("-save-layout: only with -save (the layout of the file it writes)")
	}
	if o.generates() && o.temperature == 0 {
		for _, f := range []string{"top-k", "top-p", "seed"} {
			if o.set[f] {
				return fmt.Errorf("-%s: -temperature 0 decodes greedily and does not sample", f)
			}
		}
	}
	return nil
}

// checkStopEOT refuses -stop-eot given for a tokenizer that has no
// end-of-text token: there is nothing to stop at either way.
func (o *options) checkStopEOT(tok tokenizer.Tokenizer) error {
	if _, ok := tok.EOT(); !ok && o.set["stop-eot"] && o.generates() {
		return cli.Usagef("-stop-eot: the %s tokenizer has no end-of-text token", tok.Name())
	}
	return nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil {
		err = run(o, os.Stdout, os.Stderr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a bad flag (a cli.UsageError), 128 + the signal after an interrupted write (a *cli.ExitError), else 1
	}
}

// run loads the model and does what the flags ask: -save, -dump-logits
// (of -prompt) and -addition, in that order, or else generation.
func run(o *options, stdout, stderr io.Writer) error {
	dev, err := cli.OpenDevice(o.device)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	cfg, from, err := modelConfig(o)
	if err != nil {
		return err
	}
	// What train-gpt recorded beside the weights (none when the file has
	// no metadata header or another program wrote it).
	md := o.info.Metadata
	digits, err := settleDigits(o, md)
	if err != nil {
		return err
	}
	saved := savedTokenizer(md)
	if o.tokenizer != "" && saved != "" && o.tokenizer != saved {
		return cli.Usagef("-tokenizer %s disagrees with the file's metadata (trained with -tokenizer %s)", o.tokenizer, saved)
	}
	file := ""
	if o.tokenizer == "" && saved != "" {
		file = o.weights
	}
	tok, err := pickTokenizer(cmp.Or(o.tokenizer, saved), cfg.Vocab, file)
	if err != nil {
		return err
	}
	if err := o.checkStopEOT(tok); err != nil {
		return err
	}
	ids, err := o.checkBeforeLoad(tok, cfg) // the prompt's tokens, encoded once
	if err != nil {
		return err
	}
	start := time.Now()
	g, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(0, 0))})
	if err != nil {
		return err
	}
	defer nn.Release(g.Parameters())
	g.SetTraining(false)
	_, layout, err := nn.LoadWeightsLayout(o.weights, g.Parameters(), o.lay)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "generate: %s (%s layout) on %v: %d layers, %d heads, width %d, context %d, vocabulary %d (shape from %s), tokenizer %s; loaded in %v\n",
		o.weights, layout, dev, cfg.Layers, cfg.Heads, cfg.Width, cfg.Context, cfg.Vocab, from, tok.Name(), time.Since(start).Round(time.Millisecond))
	did := false
	if o.save != "" {
		meta := map[string]string{"producer": "strata generate", "tokenizer": tok.Name()}
		if !o.headsGuessed { // a guess recorded would read as the file's own shape
			meta["config"] = fmt.Sprintf("%+v", cfg)
		}
		if digits > 0 {
			meta["digits"] = strconv.Itoa(digits)
		}
		if err := cli.Interruptible("saving the weights to "+o.save, func(ctx context.Context) error {
			return nn.SaveWeightsLayout(ctx, o.save, g.Parameters(), meta, o.saveLay)
		}); err != nil {
			var ex *cli.ExitError
			if errors.As(err, &ex) {
				return err
			}
			return fmt.Errorf("-save: %w", err)
		}
		fmt.Fprintf(stderr, "saved the weights to %s (%s layout)\n", o.save, o.saveLay)
		if o.headsGuessed {
			fmt.Fprintf(stderr, "generate: -save: the heads (%d) were a guess, not recorded in %s: give -heads to record the model's config\n", cfg.Heads, o.save)
		}
		did = true
	}
	if o.dumpLogits != "" {
		if err := dumpLogits(o, g, ids, layout, stderr); err != nil {
			return err
		}
		did = true
	}
	if o.addition > 0 {
		if err := additionAccuracy(o, g, tok, stdout, stderr); err != nil {
			return err
		}
		did = true
	}
	if !did {
		return generate(o, g, tok, ids, stdout, stderr)
	}
	return nil
}

// checkBeforeLoad refuses, before the weights are loaded (seconds for
// GPT-2 medium), what the model's shape and tokenizer, known from the
// file's header, rule out: an empty -prompt where one is read,
// -dump-logits of a prompt past the context, -addition's problems for
// this model (checkAddition). It returns the prompt's tokens (promptIDs)
// where the run reads -prompt (generation, -dump-logits), else nil: the
// run uses them rather than encode the prompt again.
func (o *options) checkBeforeLoad(tok tokenizer.Tokenizer, cfg nn.GPTConfig) ([]int, error) {
	var ids []int
	if o.generates() || o.dumpLogits != "" {
		var err error
		if ids, err = promptIDs(o, tok, cfg.Context); err != nil {
			return nil, err
		}
	}
	if o.addition > 0 {
		if err := checkAddition(o, tok, cfg.Context); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// modelConfig is the model's shape: the file's metadata, else -config,
// else the tensor shapes with the heads from -heads, config.json or
// width/64 (from the header check read).
func modelConfig(o *options) (nn.GPTConfig, string, error) {
	if o.infoErr != nil {
		return nn.GPTConfig{}, "", o.infoErr
	}
	cfg, fromMeta, err := o.info.Config()
	if err != nil {
		return cfg, "", err
	}
	if fromMeta {
		cfg.Dropout = 0
		if o.config != "" {
			p, _ := nn.LookupGPTConfig(o.config)
			if !sameShape(p, cfg) {
				return cfg, "", cli.Usagef("-config %s (%s) disagrees with the file's metadata (%s)", o.config, shape(p), shape(cfg))
			}
		}
		if o.heads > 0 && o.heads != cfg.Heads {
			return cfg, "", cli.Usagef("-heads %d disagrees with the file's metadata (%d heads)", o.heads, cfg.Heads)
		}
		return cfg, "the file's metadata", nil
	}
	if o.config != "" {
		// cfg is the tensor shapes' (no heads): the load takes exactly
		// those sizes, so a -config of others is refused before a model
		// of its size is made.
		p, _ := nn.LookupGPTConfig(o.config)
		p.Dropout = 0
		if p.Vocab != cfg.Vocab || p.Context != cfg.Context || p.Layers != cfg.Layers || p.Width != cfg.Width {
			return cfg, "", cli.Usagef("-config %s (%s) disagrees with the file's tensor shapes (%s)", o.config, sizes(p), sizes(cfg))
		}
		if o.heads > 0 {
			p.Heads = o.heads
			if err := p.Validate(); err != nil {
				return p, "", cli.Usagef("-heads %d: %v", p.Heads, err)
			}
		}
		return p, "-config " + o.config, p.Validate()
	}
	from := "the tensor shapes"
	hfConfig := filepath.Join(filepath.Dir(o.weights), "config.json")
	hfHeads := 0
	if o.heads <= 0 {
		if hfHeads, err = readHFHeads(hfConfig); err != nil { // read once, only where -heads is not given
			return cfg, "", err
		}
	}
	switch {
	case o.heads > 0:
		cfg.Heads = o.heads
		from += ", -heads"
	case hfHeads > 0:
		cfg.Heads = hfHeads
		from += ", config.json's n_head"
	case cfg.Width%64 == 0:
		cfg.Heads = cfg.Width / 64
		from += ", heads of width 64 (GPT-2's; -heads to change)"
		o.headsGuessed = true
	default:
		return cfg, "", cli.Usagef("-heads: the file has no config in its metadata and its width %d is not a multiple of 64: give -heads or -config", cfg.Width)
	}
	if err := cfg.Validate(); err != nil {
		// A bad flag (status 2) only where the flag gave the heads; else
		// the file's or config.json's shape is bad (status 1), named.
		switch {
		case o.heads > 0:
			return cfg, "", cli.Usagef("-heads %d: %v", cfg.Heads, err)
		case hfHeads > 0:
			return cfg, "", fmt.Errorf("%s: n_head %d does not fit the tensor shapes of %s: %v (give -heads to override it)", hfConfig, hfHeads, o.weights, err)
		default:
			return cfg, "", fmt.Errorf("%s: the shape of its tensors, with heads of width 64 (%d heads): %v", o.weights, cfg.Heads, err)
		}
	}
	return cfg, from, nil
}

func sameShape(a, b nn.GPTConfig) bool {
	return a.Vocab == b.Vocab && a.Context == b.Context && a.Layers == b.Layers && a.Heads == b.Heads && a.Width == b.Width
}

func shape(c nn.GPTConfig) string {
	return fmt.Sprintf("vocabulary %d, context %d, %d layers, %d heads, width %d", c.Vocab, c.Context, c.Layers, c.Heads, c.Width)
}

// sizes is c's shape but its heads, which tensor shapes do not tell.
func sizes(c nn.GPTConfig) string {
	return fmt.Sprintf("vocabulary %d, context %d, %d layers, width %d", c.Vocab, c.Context, c.Layers, c.Width)
}

// maxHFConfig is the most bytes readHFHeads reads of a config.json: GPT-2's
// is under 1 KiB, and the largest models' a few KiB.
const maxHFConfig = 4 << 20

// readHFHeads is n_head from a Hugging Face config.json, or 0 where
// there is no such file or it gives none. A config.json that is there
// but is not a regular file, is larger than maxHFConfig, cannot be read,
// is not JSON or gives a negative n_head is an error naming it:
// os.ReadFile of a named pipe blocked for ever and of /dev/zero grew
// until the process died, as did the allocation of a sparse terabyte's,
// and a file passed over left the heads to width/64, a guess that, wrong,
// makes the model's output garbage without a word.
func readHFHeads(path string) (int, error) {
	b, err := atomicfile.ReadRegular(path, maxHFConfig)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading n_head from config.json: %w (give -heads to do without it)", err)
	}
	var c struct {
		NHead int `json:"n_head"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("%s: not a config.json of n_head: %v (give -heads to do without it)", path, err)
	}
	if c.NHead < 0 {
		return 0, fmt.Errorf("%s: n_head %d (give -heads to override it)", path, c.NHead)
	}
	return c.NHead, nil
}

// savedTokenizer is the tokenizer the weights' metadata md names
// (train-gpt records its -tokenizer), or "" when it names none this
// program knows.
func savedTokenizer(md map[string]string) string {
	if !slices.Contains(tokenizer.Names(), md["tokenizer"]) {
		return ""
	}
	return md["tokenizer"]
}

// newTokenizer is tokenizer.New (tests: a tokenizer that counts its
// encodings).
var newTokenizer = tokenizer.New

// pickTokenizer returns -tokenizer's tokenizer, or by default the one the
// vocabulary size suggests; its ids must fit the model's vocabulary.
// file, when not "", is the weights whose metadata named it (no
// -tokenizer given): one that does not fit is the file's error, not a
// bad flag.
func pickTokenizer(name string, vocab int, file string) (tokenizer.Tokenizer, error) {
	if name == "" {
		switch {
		case vocab == 256:
			name = "byte"
		case vocab >= 50257 && vocab <= 50304: // GPT-2's, or nanoGPT's padded to 64
			name = "gpt2"
		default:
			return nil, cli.Usagef("-tokenizer: the model's vocabulary of %d suggests neither byte (256) nor gpt2 (50257): choose one", vocab)
		}
	}
	t, err := newTokenizer(name)
	if err != nil {
		return nil, cli.UsageError{Err: err}
	}
	switch {
	case t.VocabSize() <= vocab:
	case file != "":
		return nil, fmt.Errorf("%s: its metadata's tokenizer %s has %d ids, more than the model's vocabulary of %d", file, name, t.VocabSize(), vocab)
	default:
		return nil, cli.Usagef("-tokenizer %s: %d ids, more than the model's vocabulary of %d", name, t.VocabSize(), vocab)
	}
	return t, nil
}

// encode is the prompt's tokens: at least one, and any number (past the
// context, generation sees the last Context tokens).
func encode(tok tokenizer.Tokenizer, prompt string) ([]int, error) {
	ids := tok.Encode(prompt)
	if len(ids) == 0 {
		return nil, cli.Usagef("-prompt: empty (it must hold at least one token)")
	}
	return ids, nil
}

// promptIDs is -prompt's tokens (encode); for -dump-logits, whose full
// forward takes at most the context, no more than context of them.
func promptIDs(o *options, tok tokenizer.Tokenizer, context int) ([]int, error) {
	ids, err := encode(tok, o.prompt)
	if err != nil {
		return nil, err
	}
	if o.dumpLogits != "" && len(ids) > context {
		return nil, cli.Usagef("-dump-logits: the prompt has %d tokens, more than the model's context of %d", len(ids), context)
	}
	return ids, nil
}

// generate continues -prompt, whose tokens are ids (checkBeforeLoad's),
// streaming the text to stdout, and reports the speed on stderr. A prompt
// longer than the context is printed whole and continued from its last
// Context tokens, as nanoGPT's generate crops.
func generate(o *options, g *nn.GPT, tok tokenizer.Tokenizer, ids []int, stdout, stderr io.Writer) error {
	promptInfo := fmt.Sprintf("prompt %d tokens", len(ids))
	if len(ids) > g.Config.Context {
		promptInfo += fmt.Sprintf(" (the last %d seen)", g.Config.Context)
	}
	var stop []int
	if e, ok := tok.EOT(); ok && o.stopEOT {
		stop = []int{e}
	}
	var rates []float64
	sw := &cli.StickyWriter{W: stdout} // the text's writes, checked
	text := textOut(stdout)
	if e, ok := text.(*cli.Escaper); ok {
		e.W = sw
	} else {
		text = sw
	}
	for run := range o.runs {
		show := run == 0 && !o.quiet
		if show {
			if _, err := io.WriteString(text, o.prompt); err != nil {
				return fmt.Errorf("writing the text to stdout: %w", err)
			}
		}
		var first time.Duration
		n := 0
		start := time.Now()
		var streamErr error
		out, err := g.Generate(nil, ids, nn.GenerateOptions{
			MaxNewTokens: o.maxNew, Temperature: o.temperature, TopK: o.topK, TopP: o.topP, Seed: o.seed, StopTokens: stop,
			Vocab: tok.VocabSize(), // ids the tokenizer can decode (pickTokenizer checked they fit the model's)
			OnToken: func(t int) bool {
				if n++; n == 1 {
					first = time.Since(start)
				}
				if show {
					s, err := tok.Decode([]int{t})
					if err == nil {
						_, err = io.WriteString(text, s)
					}
					if err != nil {
						streamErr = err
						return false
					}
				}
				return true
			},
		})
		total := time.Since(start)
		if show {
			if e, ok := text.(*cli.Escaper); ok && streamErr == nil {
				streamErr = e.Flush()
			}
			if _, err := fmt.Fprintln(sw); streamErr == nil {
				streamErr = err
			}
		}
		if err != nil {
			return err
		}
		if streamErr != nil {
			return fmt.Errorf("writing the text to stdout: %w", streamErr)
		}
		rate := float64(len(out)) / total.Seconds()
		rates = append(rates, rate)
		fmt.Fprintf(stderr, "run %d: %s, generated %d tokens in %v", run+1, promptInfo, len(out), total.Round(time.Microsecond))
		if len(out) > 0 { // no token, no first-token time
			decode := "-"
			if len(out) > 1 {
				decode = fmt.Sprintf("%.1f", float64(len(out)-1)/(total-first).Seconds())
			}
			fmt.Fprintf(stderr, ": %.1f tokens/s (first token after %v, then %s tokens/s)", rate, first.Round(time.Microsecond), decode)
		}
		fmt.Fprintln(stderr)
	}
	if len(rates) > 1 {
		rest := slices.Clone(rates[1:])
		sort.Float64s(rest)
		fmt.Fprintf(stderr, "median of runs 2-%d: %.1f tokens/s\n", len(rates), rest[len(rest)/2])
	}
	return nil
}

// textOut is where the generated text goes: on a terminal, escaped
// (cli.Escaper: a model's control characters would act on it), else as
// it is (a file or a pipe gets the bytes the model made).
func textOut(stdout io.Writer) io.Writer {
	if f, ok := stdout.(*os.File); ok && cli.IsTerminal(f) {
		return &cli.Escaper{W: stdout}
	}
	return stdout
}

// dumpFile is what -dump-logits writes: the prompt's tokens and the
// logits of every position from the full forward (GPT.Forward) and from
// the KV cache (Decoder, one token at a time).
type dumpFile struct {
	Weights      string      `json:"weights"`
	Layout       string      `json:"layout"`
	Device       string      `json:"device"`
	Config       dumpConfig  `json:"config"`
	Tokens       []int       `json:"tokens"`
	Logits       [][]float32 `json:"logits"`
	CachedLogits [][]float32 `json:"cached_logits"`
}

type dumpConfig struct {
	Vocab   int `json:"vocab"`
	Context int `json:"context"`
	Layers  int `json:"layers"`
	Heads   int `json:"heads"`
	Width   int `json:"width"`
}

// dumpLogits writes -dump-logits for the prompt's tokens, ids
// (checkBeforeLoad's: at most the context).
func dumpLogits(o *options, g *nn.GPT, ids []int, layout nn.Layout, stderr io.Writer) error {
	cfg := g.Config
	d := dumpFile{
		Weights: o.weights, Layout: layout.String(), Device: fmt.Sprint(g.Wte.Weight.Value.Device()), Tokens: ids,
		Config: dumpConfig{Vocab: cfg.Vocab, Context: cfg.Context, Layers: cfg.Layers, Heads: cfg.Heads, Width: cfg.Width},
	}
	x := make([]int32, len(ids))
	for i, t := range ids {
		x[i] = int32(t)
	}
	c := tensor.NewCtx()
	var all []float32
	if err := tensor.Try(func() {
		autograd.NoGradIn(c, func() {
			c.WithScope(func() {
				all = g.Forward(c.FromInt32s(g.Wte.Weight.Value.Device(), x, 1, len(x))).Value.Float32s()
			})
		})
	}); err != nil {
		return err
	}
	dec, err := g.NewDecoder(c)
	if err != nil {
		return err
	}
	defer dec.Release()
	V := cfg.Vocab
	for i := range ids {
		d.Logits = append(d.Logits, all[i*V:(i+1)*V])
		l, err := dec.Feed(ids[i : i+1])
		if err != nil {
			return err
		}
		d.CachedLogits = append(d.CachedLogits, l)
	}
	// JSON has no NaN or infinity: json.Marshal's own error ("unsupported
	// value: NaN") would name neither the flag nor where the model's
	// forward went wrong.
	for i := range ids {
		for _, ls := range []struct {
			what string
			l    []float32
		}{{"full forward", d.Logits[i]}, {"KV cache", d.CachedLogits[i]}} {
			for j, v := range ls.l {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return fmt.Errorf("-dump-logits: logit %d of token %d (%s) is %v: the model's forward is not finite, and JSON cannot hold it", j, i, ls.what, v)
				}
			}
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := cli.Interruptible("writing the logits to "+o.dumpLogits, func(ctx context.Context) error {
		return atomicfile.Write(ctx, o.dumpLogits, func(w io.Writer) error {
			_, err := w.Write(b)
			return err
		})
	}); err != nil {
		var ex *cli.ExitError
		if errors.As(err, &ex) {
			return err
		}
		return fmt.Errorf("-dump-logits: %w", err)
	}
	fmt.Fprintf(stderr, "wrote the logits of %d tokens to %s\n", len(ids), o.dumpLogits)
	return nil
}
