package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/addition"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

var testCfg = nn.GPTConfig{Vocab: 256, Context: 16, Layers: 2, Heads: 2, Width: 16}

// testWeights saves a random GPT of cfg (weights scaled up so that
// greedy decoding varies) with train-gpt's metadata when meta, and
// returns it and the path.
func testWeights(t *testing.T, cfg nn.GPTConfig, meta bool, layout nn.Layout) (*nn.GPT, string) {
	t.Helper()
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(9, 9))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	for _, p := range g.Parameters() {
		if p.Value.Rank() == 2 {
			p.Value.ScaleInPlace(15)
		}
	}
	var m map[string]string
	if meta {
		m = map[string]string{"config": fmt.Sprintf("%+v", cfg), "producer": "strata train-gpt"}
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, g.Parameters(), m, layout))
	return g, path
}

func TestFlagsCheckedUpFront(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "-weights: a safetensors file is required"},
		{[]string{"-weights", filepath.Join(dir, "none.safetensors")}, "-weights: stat " + filepath.Join(dir, "none.safetensors") + ": no such file or directory"},
		{[]string{"-weights", w, "-max-new", "-1"}, "-max-new -1"},
		{[]string{"-weights", w, "-temperature", "-1"}, "-temperature -1"},
		{[]string{"-weights", w, "-temperature", "NaN"}, "-temperature NaN"},
		{[]string{"-weights", w, "-top-k", "-2"}, "-top-k -2"},
		{[]string{"-weights", w, "-top-p", "0"}, "-top-p 0: want a probability in (0, 1]"},
		{[]string{"-weights", w, "-top-p", "1.5"}, "-top-p 1.5"},
		{[]string{"-weights", w, "-runs", "0"}, "-runs 0"},
		{[]string{"-weights", w, "-heads", "-1"}, "-heads -1"},
		{[]string{"-weights", w, "-addition", "-5"}, "-addition -5"},
		{[]string{"-weights", w, "-digits", "9"}, "-digits 9"},
		{[]string{"-weights", w, "-layout", "keras"}, `-layout "keras"`},
		{[]string{"-weights", w, "-save-layout", "auto"}, `-save-layout "auto"`},
		{[]string{"-weights", w, "-tokenizer", "sentencepiece"}, `-tokenizer "sentencepiece": want byte or gpt2`},
		{[]string{"-weights", w, "-config", "huge"}, `-config "huge"`},
		{[]string{"-weights", w, "-dump-logits", filepath.Join(dir, "no", "l.json")}, "its directory does not exist"},
		{[]string{"-weights", w, "-dump-logits", filepath.Join(w, "l.json")}, "-dump-logits: cannot write " + filepath.Join(w, "l.json") + ": stat " + w + "/: not a directory"},
		{[]string{"-weights", w, "-save", w}, "would overwrite -weights"},
		{[]string{"-weights", w, "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-weights", w, "-nosuchflag"}, "flag provided but not defined"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%v: %v", tc.args, err)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	o, err := parseFlags([]string{"-weights", w}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 200, o.maxNew)
	_, err = parseFlags([]string{"-h"}, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
}

// runArgs parses args and runs, returning stdout, stderr and the error.
func runArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	o, err := parseFlags(append(args, "-device", "cpu"), io.Discard)
	if err != nil {
		return "", "", err
	}
	var out, errb bytes.Buffer
	err = run(o, &out, &errb)
	return out.String(), errb.String(), err
}

func TestGenerateGreedy(t *testing.T) {
	g, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	prompt := "12+34="
	want, err := g.Generate(nil, []int{'1', '2', '+', '3', '4', '='}, nn.GenerateOptions{MaxNewTokens: 20})
	require.NoError(t, err)
	text := make([]byte, len(want))
	for i, b := range want {
		text[i] = byte(b)
	}
	out, errs, err := runArgs(t, "-weights", w, "-prompt", prompt, "-temperature", "0", "-max-new", "20", "-runs", "2")
	require.NoError(t, err)
	require.Equal(t, prompt+string(text)+"\n", out, "the prompt and its greedy continuation, past the context")
	require.Contains(t, errs, "(nanogpt layout)")
	require.Contains(t, errs, "shape from the file's metadata")
	require.Contains(t, errs, "generated 20 tokens")
	require.Contains(t, errs, "tokens/s")
	require.Contains(t, errs, "median of runs 2-2")

	// Sampling: the same seed gives the same text.
	a, _, err := runArgs(t, "-weights", w, "-prompt", prompt, "-max-new", "10", "-seed", "5")
	require.NoError(t, err)
	b, _, err := runArgs(t, "-weights", w, "-prompt", prompt, "-max-new", "10", "-seed", "5")
	require.NoError(t, err)
	require.Equal(t, a, b)

	// An empty prompt.
	_, _, err = runArgs(t, "-weights", w, "-prompt", "")
	require.ErrorContains(t, err, "-prompt: empty")
}

// TestPromptPastContext: a prompt longer than the context is printed
// whole and continued from its last Context tokens, as README says and
// nanoGPT's generate does (it used to be refused); -dump-logits, whose
// full forward takes at most the context, refuses it.
func TestPromptPastContext(t *testing.T) {
	g, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	prompt := "123+456=579\n98+76="
	require.Greater(t, len(prompt), testCfg.Context)
	ids := make([]int, len(prompt))
	for i := range prompt {
		ids[i] = int(prompt[i])
	}
	want, err := g.Generate(nil, ids[len(ids)-testCfg.Context:], nn.GenerateOptions{MaxNewTokens: 10})
	require.NoError(t, err)
	text := make([]byte, len(want))
	for i, b := range want {
		text[i] = byte(b)
	}
	out, errs, err := runArgs(t, "-weights", w, "-prompt", prompt, "-temperature", "0", "-max-new", "10")
	require.NoError(t, err)
	require.Equal(t, prompt+string(text)+"\n", out)
	require.Contains(t, errs, fmt.Sprintf("prompt %d tokens (the last 16 seen)", len(prompt)))
	_, _, err = runArgs(t, "-weights", w, "-prompt", prompt, "-dump-logits", filepath.Join(t.TempDir(), "l.json"))
	require.ErrorContains(t, err, fmt.Sprintf("-dump-logits: the prompt has %d tokens, more than the model's context of 16", len(prompt)))
}

func TestSaveDumpAndLayouts(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf.safetensors")
	dump := filepath.Join(dir, "l.json")
	_, errs, err := runArgs(t, "-weights", w, "-save", hf, "-save-layout", "hf", "-prompt", "9+9=", "-dump-logits", dump)
	require.NoError(t, err)
	require.Contains(t, errs, "saved the weights to "+hf+" (hf layout)")
	var d dumpFile
	b, err := os.ReadFile(dump)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &d))
	require.Equal(t, []int{'9', '+', '9', '='}, d.Tokens)
	require.Equal(t, dumpConfig{Vocab: 256, Context: 16, Layers: 2, Heads: 2, Width: 16}, d.Config)
	require.Len(t, d.Logits, 4)
	require.Len(t, d.CachedLogits, 4)
	for i := range d.Logits {
		require.Len(t, d.Logits[i], 256)
		for j := range d.Logits[i] {
			require.InDelta(t, d.Logits[i][j], d.CachedLogits[i][j], 1e-5)
		}
	}
	// The hf copy generates the same text.
	a, _, err := runArgs(t, "-weights", w, "-prompt", "9+9=", "-temperature", "0", "-max-new", "8")
	require.NoError(t, err)
	c, errs, err := runArgs(t, "-weights", hf, "-prompt", "9+9=", "-temperature", "0", "-max-new", "8")
	require.NoError(t, err)
	require.Equal(t, a, c)
	require.Contains(t, errs, "(hf layout)")
	_, _, err = runArgs(t, "-weights", hf, "-layout", "nanogpt", "-prompt", "9+9=")
	require.ErrorContains(t, err, "(nanogpt layout) missing [transformer.")

	// Without metadata: the shape from the tensors, heads from -heads,
	// config.json or width/64.
	_, bare := testWeights(t, testCfg, false, nn.LayoutHF)
	_, _, err = runArgs(t, "-weights", bare, "-prompt", "1")
	require.ErrorContains(t, err, "-heads: the file has no config in its metadata and its width 16 is not a multiple of 64")
	_, errs, err = runArgs(t, "-weights", bare, "-heads", "2", "-prompt", "1", "-max-new", "3")
	require.NoError(t, err)
	require.Contains(t, errs, "shape from the tensor shapes, -heads")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(bare), "config.json"), []byte(`{"n_head": 2, "n_embd": 16}`), 0o644))
	_, errs, err = runArgs(t, "-weights", bare, "-prompt", "1", "-max-new", "3")
	require.NoError(t, err)
	require.Contains(t, errs, "config.json's n_head")
	_, _, err = runArgs(t, "-weights", bare, "-heads", "3", "-prompt", "1")
	require.ErrorContains(t, err, "-heads 3: nn: GPT config: width 16 is not divisible by 3 heads")
	// -config against the metadata.
	_, _, err = runArgs(t, "-weights", w, "-config", "tiny")
	require.ErrorContains(t, err, "-config tiny (vocabulary 256, context 64, 2 layers, 4 heads, width 128) disagrees with the file's metadata")
}

func TestTokenizerChoice(t *testing.T) {
	cfg := testCfg
	cfg.Vocab = 100
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	_, _, err := runArgs(t, "-weights", w, "-prompt", "a")
	require.ErrorContains(t, err, "vocabulary of 100 suggests neither byte (256) nor gpt2 (50257)")
	_, _, err = runArgs(t, "-weights", w, "-tokenizer", "byte", "-prompt", "a")
	require.ErrorContains(t, err, "-tokenizer byte: 256 ids, more than the model's vocabulary of 100")
}

func TestAddition(t *testing.T) {
	next := heldOutProblems(3)
	for range 20 {
		p, answer := next()
		var x, y int
		_, err := fmt.Sscanf(p, "%d+%d=", &x, &y)
		require.NoError(t, err)
		require.True(t, addition.HeldOut(x, y), p)
		_, want := addition.Problem(3, x, y)
		require.Equal(t, want, answer)
	}

	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	out, errs, err := runArgs(t, "-weights", w, "-addition", "10")
	require.NoError(t, err)
	require.Contains(t, out, "held-out accuracy: ")
	require.Contains(t, out, "/10 = ")
	require.Contains(t, errs, "tokens/s")
	_, _, err = runArgs(t, "-weights", w, "-addition", "10", "-digits", "4")
	require.ErrorContains(t, err, "-addition: a 4-digit problem is 15 tokens, more than the model's context of 12")
}

func TestGPT2Tokenizer(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 50257, Context: 16, Layers: 1, Heads: 2, Width: 16}
	_, w := testWeights(t, cfg, true, nn.LayoutHF)
	out, errs, err := runArgs(t, "-weights", w, "-prompt", "Hello, world", "-max-new", "5", "-seed", "3")
	require.NoError(t, err)
	require.Contains(t, errs, "tokenizer gpt2")
	require.Contains(t, errs, "(hf layout)")
	require.True(t, strings.HasPrefix(out, "Hello, world"), out)
	long := strings.Repeat("word ", 20)
	out, errs, err = runArgs(t, "-weights", w, "-prompt", long, "-max-new", "3")
	require.NoError(t, err, "a prompt past the context is cropped")
	require.True(t, strings.HasPrefix(out, long), out)
	require.Contains(t, errs, "prompt 21 tokens (the last 16 seen)")
}

// The files -weights reads and -save and -dump-logits write are checked
// with the flags (status 2, naming the flag) before the model is loaded:
// a directory, a path where no file can be created, the two outputs on
// one file (the logits used to replace the saved weights).
func TestFilesCheckedUpFront(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-weights", dir}, "-weights: " + dir + " is a directory"},
		{[]string{"-weights", w, "-save", dir}, "-save: " + dir + " is a directory"},
		{[]string{"-weights", w, "-dump-logits", dir}, "-dump-logits: " + dir + " is a directory"},
		{[]string{"-weights", w, "-save", "/proc/x.safetensors"}, "-save: cannot write /proc/x.safetensors: cannot create files in /proc/"},
		{[]string{"-weights", w, "-dump-logits", "/proc/l.json"}, "-dump-logits: cannot write /proc/l.json"},
		{[]string{"-weights", w, "-save", out, "-dump-logits", dir + "/./o.safetensors"}, "-dump-logits " + dir + "/./o.safetensors: the same file as -save"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%v: %v", tc.args, err)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
	require.Empty(t, testfs.Names(t, dir), "the checks leave no file behind")
}

// A model train-gpt trained on bytes with a vocabulary of GPT-2's size
// (-config gpt2 without -tokenizer gpt2: the addition task, or text as
// bytes) is read with the tokenizer its file names, not the one its
// vocabulary suggests: gpt2 would feed it BPE ids it never saw. A
// -tokenizer other than the recorded one is refused, as -digits is (it
// used to run and print nonsense).
func TestTokenizerFromMetadata(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 50257, Context: 16, Layers: 1, Heads: 2, Width: 16}
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(9, 9))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	w := filepath.Join(t.TempDir(), "w.safetensors")
	meta := map[string]string{"config": fmt.Sprintf("%+v", cfg), "producer": "strata train-gpt", "tokenizer": "byte"}
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), w, g.Parameters(), meta, nn.LayoutNanoGPT))
	_, errs, err := runArgs(t, "-weights", w, "-prompt", "12+34=", "-max-new", "0")
	require.NoError(t, err)
	require.Contains(t, errs, "tokenizer byte")
	require.Contains(t, errs, "prompt 6 tokens")
	_, _, err = runArgs(t, "-weights", w, "-prompt", "Hello", "-max-new", "0", "-tokenizer", "gpt2")
	var u cli.UsageError
	require.True(t, errors.As(err, &u), "a -tokenizer other than the recorded one is refused (exit 2): %v", err)
	require.EqualError(t, err, "-tokenizer gpt2 disagrees with the file's metadata (trained with -tokenizer byte)")
	_, errs, err = runArgs(t, "-weights", w, "-prompt", "12", "-max-new", "0", "-tokenizer", "byte")
	require.NoError(t, err, "the recorded one, given")
	require.Contains(t, errs, "tokenizer byte")
	require.Equal(t, "byte", resavedMetadata(t, w)["tokenizer"], "-save keeps it")
}

// resavedMetadata is the metadata of the file -save writes from w.
func resavedMetadata(t *testing.T, w string) map[string]string {
	t.Helper()
	saved := filepath.Join(t.TempDir(), "hf.safetensors")
	_, _, err := runArgs(t, "-weights", w, "-save", saved)
	require.NoError(t, err)
	md, err := tensor.ReadSafetensorsMetadata(saved)
	require.NoError(t, err)
	return md
}

// TestByteModelWithLargerVocab: a byte-level model whose vocabulary has
// more ids than bytes (train-gpt -vocab 300) samples only ids the byte
// tokenizer decodes, at any temperature (ids of 256 and above used to
// stop the run with "out of range").
func TestByteModelWithLargerVocab(t *testing.T) {
	cfg := testCfg
	cfg.Vocab = 300
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	for seed := range 5 {
		out, _, err := runArgs(t, "-weights", w, "-tokenizer", "byte", "-prompt", "12+34=", "-temperature", "3", "-top-k", "0",
			"-max-new", "60", "-seed", fmt.Sprint(seed))
		require.NoError(t, err, "seed %d", seed)
		require.True(t, strings.HasPrefix(out, "12+34="))
	}
}

// TestLinkedOutputsRefused: -save or -dump-logits naming -weights through
// a hard link or a symbolic link is refused as the same path is (cli.SamePath,
// as the other programs check), and so are the two outputs on one file.
func TestLinkedOutputsRefused(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	dir := t.TempDir()
	hard, soft := filepath.Join(dir, "hard.safetensors"), filepath.Join(dir, "soft.safetensors")
	require.NoError(t, os.Link(w, hard))
	require.NoError(t, os.Symlink(w, soft))
	for _, flagName := range []string{"-save", "-dump-logits"} {
		for _, p := range []string{hard, soft} {
			_, err := parseFlags([]string{"-weights", w, flagName, p}, io.Discard)
			var u cli.UsageError
			require.True(t, errors.As(err, &u), "%s %s: %v", flagName, p, err)
			require.ErrorContains(t, err, flagName+" "+p+": would overwrite -weights")
		}
	}
	out := filepath.Join(dir, "o.safetensors")
	require.NoError(t, os.WriteFile(out, nil, 0o644))
	link := filepath.Join(dir, "o-link.json")
	require.NoError(t, os.Link(out, link))
	_, err := parseFlags([]string{"-weights", w, "-save", out, "-dump-logits", link}, io.Discard)
	require.ErrorContains(t, err, "-dump-logits "+link+": the same file as -save")
}

// TestQuiet: -quiet prints no generated text: with -addition only the
// accuracy line (the example problems and wrong answers used to be
// printed anyway). -max-new 0 reports no first-token time (it used to
// print "first token after 0s" for a token never generated).
func TestQuiet(t *testing.T) {
	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	out, _, err := runArgs(t, "-weights", w, "-addition", "10")
	require.NoError(t, err)
	require.GreaterOrEqual(t, strings.Count(out, "\n"), 4, "three examples and the accuracy: %q", out)
	out, errs, err := runArgs(t, "-weights", w, "-addition", "10", "-quiet")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(out, "\n"), "%q", out)
	require.True(t, strings.HasPrefix(out, "held-out accuracy: "), out)
	require.Contains(t, errs, "tokens/s")

	out, errs, err = runArgs(t, "-weights", w, "-prompt", "12+", "-quiet")
	require.NoError(t, err)
	require.Empty(t, out)
	require.Contains(t, errs, "first token after")
	_, errs, err = runArgs(t, "-weights", w, "-prompt", "12+", "-max-new", "0")
	require.NoError(t, err)
	require.Contains(t, errs, "generated 0 tokens")
	require.NotContains(t, errs, "first token")
}
