package main

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestIgnoredFlagsRefused: a flag given that the run would ignore is
// refused (status 2, one line naming it), as README promises: the
// generation's flags with -addition (which answers greedily from its own
// prompts), -save or -dump-logits; -digits without -addition; sampling's
// flags with -temperature 0; -stop-eot with a tokenizer that has no
// end-of-text token. They used to run and ignore it. A flag that has a
// meaning in the mode is kept: -prompt with -dump-logits, -quiet with
// -addition.
func TestIgnoredFlagsRefused(t *testing.T) {
	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	dump := filepath.Join(t.TempDir(), "l.json")
	save := filepath.Join(t.TempDir(), "s.safetensors")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-addition", "3", "-temperature", "0.5"}, "-temperature: -addition generates no text"},
		{[]string{"-addition", "3", "-top-k", "5"}, "-top-k: -addition"},
		{[]string{"-addition", "3", "-top-p", "0.5"}, "-top-p: -addition"},
		{[]string{"-addition", "3", "-prompt", "1+1="}, "-prompt: -addition's prompts are its problems"},
		{[]string{"-addition", "3", "-max-new", "5"}, "-max-new: -addition"},
		{[]string{"-addition", "3", "-runs", "2"}, "-runs: -addition"},
		{[]string{"-addition", "3", "-seed", "2"}, "-seed: -addition"},
		{[]string{"-save", save, "-temperature", "0"}, "-temperature: -save generates no text"},
		{[]string{"-save", save, "-prompt", "x"}, "-prompt: -save generates no text"},
		{[]string{"-dump-logits", dump, "-max-new", "3"}, "-max-new: -dump-logits generates no text"},
		{[]string{"-save", save, "-quiet"}, "-quiet: -save prints no text"},
		{[]string{"-digits", "3"}, "-digits: only with -addition"},
		{[]string{"-save-layout", "nanogpt"}, "-save-layout: only with -save"},
		{[]string{"-temperature", "0", "-top-k", "5"}, "-top-k: -temperature 0 decodes greedily and does not sample"},
		{[]string{"-temperature", "0", "-top-p", "0.9"}, "-top-p: -temperature 0"},
		{[]string{"-temperature", "0", "-seed", "3"}, "-seed: -temperature 0"},
		{[]string{"-stop-eot=false", "-max-new", "2"}, "-stop-eot: the byte tokenizer has no end-of-text token"},
	} {
		_, _, err := runArgs(t, append([]string{"-weights", w}, c.args...)...)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%q: want a usage error (status 2), got %v", c.args, err)
		require.ErrorContains(t, err, c.want, "%q", c.args)
	}
	for _, args := range [][]string{
		{"-dump-logits", dump, "-prompt", "1+2="},
		{"-addition", "3", "-quiet", "-digits", "3"},
		{"-save", save, "-save-layout", "nanogpt", "-dump-logits", dump, "-prompt", "7"},
		{"-temperature", "0.7", "-top-k", "5", "-top-p", "0.9", "-seed", "3", "-max-new", "2", "-prompt", "1"},
		{"-temperature", "0", "-max-new", "2", "-prompt", "1"},
	} {
		_, _, err := runArgs(t, append([]string{"-weights", w}, args...)...)
		require.NoError(t, err, "%q", args)
	}
	_, err := parseFlags([]string{"-weights", w, "-addition", "3", "-temperature", "0.5"}, io.Discard)
	require.ErrorContains(t, err, "-temperature", "refused with the flags, before the model loads")
}

// failWriter fails every write, as stdout on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestResultsWriteFailure: -addition's accuracy line (its result) and the
// generated text going to a stdout that fails are a failure of the run
// (status 1), naming stdout; -addition used to exit 0 with the result
// lost, and generation with -max-new 0 too.
func TestResultsWriteFailure(t *testing.T) {
	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	for _, args := range [][]string{
		{"-addition", "3", "-quiet"},
		{"-addition", "3"},
		{"-prompt", "12+", "-max-new", "0"},
		{"-prompt", "12+", "-max-new", "3"},
	} {
		o, err := parseFlags(append([]string{"-weights", w, "-device", "cpu"}, args...), io.Discard)
		require.NoError(t, err)
		err = run(o, failWriter{}, io.Discard)
		require.ErrorContains(t, err, "to stdout: no space left on device", "%q", args)
		var u cli.UsageError
		require.False(t, errors.As(err, &u), "%q: a failure of the run, status 1", args)
	}
}

// TestDeviceErrors: a malformed -device is refused with the flags, saying
// what is wanted (it used to end in "device mismatch or unavailable
// device" after the file was read); a device that cannot be used is a bad
// flag too (status 2), saying what is wrong, before any work.
func TestDeviceErrors(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	_, err := parseFlags([]string{"-weights", w, "-device", "garbage"}, io.Discard)
	var u cli.UsageError
	require.True(t, errors.As(err, &u), "%v", err)
	require.EqualError(t, err, `-device "garbage": want cpu, cuda, cuda:N or auto`)
	if _, err := tensor.ParseDevice("cuda"); err == nil {
		t.Skip("a GPU is usable here")
	}
	o, err := parseFlags([]string{"-weights", w, "-device", "cuda", "-max-new", "1"}, io.Discard)
	require.NoError(t, err)
	err = run(o, io.Discard, io.Discard)
	require.True(t, errors.As(err, &u), "status 2: %v", err)
	require.ErrorContains(t, err, "-device cuda: no usable GPU: ")
	require.NotContains(t, err.Error(), "device mismatch")
	require.NotContains(t, err.Error(), "tensor:")
}
