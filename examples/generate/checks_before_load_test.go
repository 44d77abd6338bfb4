package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tokenizer"
)

// TestPromptAndModeCheckedBeforeLoad: what the flags ask that the model's
// shape and tokenizer (known from the file's header) rule out is refused
// before the weights are loaded (GPT-2 medium's 1.4 GB take seconds), as
// a bad flag: an empty -prompt, -dump-logits of a prompt past the
// context, -addition with a tokenizer other than byte or problems past
// the context. They were found once the weights were loaded.
func TestPromptAndModeCheckedBeforeLoad(t *testing.T) {
	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	g2 := nn.GPTConfig{Vocab: 50257, Context: 16, Layers: 1, Heads: 2, Width: 16}
	_, w2 := testWeights(t, g2, true, nn.LayoutNanoGPT)
	dump := filepath.Join(t.TempDir(), "l.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-weights", w, "-prompt", ""}, "-prompt: empty (it must hold at least one token)"},
		{[]string{"-weights", w, "-prompt", "", "-dump-logits", dump}, "-prompt: empty"},
		{[]string{"-weights", w, "-prompt", strings.Repeat("1", 13), "-dump-logits", dump}, "-dump-logits: the prompt has 13 tokens, more than the model's context of 12"},
		{[]string{"-weights", w, "-addition", "2", "-digits", "4"}, "-addition: a 4-digit problem is 15 tokens, more than the model's context of 12"},
		{[]string{"-weights", w2, "-addition", "2"}, "-addition: train-gpt's task is byte-level; -tokenizer is gpt2"},
	} {
		_, errs, err := runArgs(t, c.args...)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%q: want a usage error, got %v", c.args, err)
		require.ErrorContains(t, err, c.want, "%q", c.args)
		require.NotContains(t, errs, "loaded in", "%q: refused before the weights are loaded", c.args)
	}
}

// countingTokenizer counts the calls of its Encode.
type countingTokenizer struct {
	tokenizer.Tokenizer
	encodes *int
}

func (c countingTokenizer) Encode(text string) []int {
	*c.encodes++
	return c.Tokenizer.Encode(text)
}

// TestPromptEncodedOnce: the prompt is encoded once, by the check before
// the weights are loaded, and generation and -dump-logits use those
// tokens. It used to be encoded again after the load (a long prompt
// through gpt2's BPE twice).
func TestPromptEncodedOnce(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	encodes := 0
	t.Cleanup(func() { newTokenizer = tokenizer.New })
	newTokenizer = func(name string) (tokenizer.Tokenizer, error) {
		tok, err := tokenizer.New(name)
		return countingTokenizer{tok, &encodes}, err
	}
	dump := filepath.Join(t.TempDir(), "l.json")
	for _, args := range [][]string{
		{"-weights", w, "-prompt", "12+34=", "-temperature", "0", "-max-new", "3"},
		{"-weights", w, "-prompt", "12+34=", "-dump-logits", dump},
	} {
		encodes = 0
		out, errs, err := runArgs(t, args...)
		require.NoError(t, err, "%q", args)
		require.Equal(t, 1, encodes, "%q: the prompt encoded once", args)
		if strings.Contains(strings.Join(args, " "), "-dump-logits") {
			require.Contains(t, errs, "wrote the logits of 6 tokens")
		} else {
			require.True(t, strings.HasPrefix(out, "12+34="), "%q", out)
			require.Contains(t, errs, "prompt 6 tokens, generated 3 tokens")
		}
	}
}
