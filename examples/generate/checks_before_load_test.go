package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
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
		var u *usageError
		require.True(t, errors.As(err, &u), "%q: want a usage error, got %v", c.args, err)
		require.ErrorContains(t, err, c.want, "%q", c.args)
		require.NotContains(t, errs, "loaded in", "%q: refused before the weights are loaded", c.args)
	}
}
