package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestSampleEscaped: the sample printed at the end shows the control
// characters of the text (its prompt is held-out text) escaped: raw, an
// ESC acted on the terminal.
func TestSampleEscaped(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "esc.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("red \x1b[31mRED\x1b[0m\r\n", 400)), 0o644))
	var err error
	b := captureStderr(t, func() {
		var o *options
		if o, err = parseFlags([]string{"-data", text, "-steps", "1", "-batch", "2", "-sample", "5", "-device", "cpu", "-quiet", "-out", "", "-loss-plot", "off"}); err == nil {
			err = run(o)
		}
	})
	require.NoError(t, err)
	_, sample, ok := strings.Cut(b, "sample (prompt from held-out text")
	require.True(t, ok, "%s", b)
	require.NotContains(t, sample, "\x1b")
	require.NotContains(t, sample, "\r")
	require.Contains(t, sample, `\x1b[31mRED\x1b[0m\r`)
}

// TestSampleCharacterAcrossPrompt: a character split between the
// sample's prompt and its generated tokens (with -tokenizer byte, a
// prompt of 32 bytes of 3-byte characters ends inside one) prints as
// the character: the two parts were escaped apart, and its bytes
// showed as \xe6\x97\xa5.
func TestSampleCharacterAcrossPrompt(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "ja.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("日", 3000)), 0o644)) // the held-out tenth starts on a character
	var err error
	b := captureStderr(t, func() {
		var o *options
		if o, err = parseFlags([]string{"-data", text, "-steps", "60", "-lr", "1e-2", "-warmup", "0", "-batch", "8", "-eval-every", "0", "-sample", "10",
			"-device", "cpu", "-quiet", "-out", "", "-loss-plot", "off"}); err == nil {
			err = run(o)
		}
	})
	require.NoError(t, err)
	_, sample, ok := strings.Cut(b, "sample (prompt from held-out text, 10 byte tokens generated):\n")
	require.True(t, ok, "%s", b)
	sample, _, _ = strings.Cut(sample, "\n")
	require.Equal(t, strings.Repeat("日", 14), sample, "32 bytes of prompt and 10 generated, learnt")
}

// TestAdditionAnswersEscaped: the held-out answers shown at the end of
// the addition task print the model's bytes escaped, as the text sample
// does: they are any of 256 ids, and an ESC among them reached the
// terminal raw (only the newline was escaped).
func TestAdditionAnswersEscaped(t *testing.T) {
	o, err := parseFlags([]string{"-steps", "1", "-batch", "2", "-device", "cpu", "-quiet", "-out", ""})
	require.NoError(t, err)
	task, err := newAdditionTask(o.digits)
	require.NoError(t, err)
	cfg, err := nn.LookupGPTConfig(o.config)
	require.NoError(t, err)
	tr, err := newTrainer(o, cfg, tensor.CPU(), task.rowLen())
	require.NoError(t, err)
	defer tr.release()
	// A model that answers ESC to everything: the last norm gives its
	// bias whatever its input, and ESC's is the only embedding (the head's
	// weights) not orthogonal to it.
	tr.model.LnF.Weight.Value.Fill(0)
	tr.model.LnF.Bias.Value.Fill(1)
	wte := make([]float32, cfg.Vocab*cfg.Width)
	for i := range cfg.Width {
		wte[0x1b*cfg.Width+i] = 1
	}
	tr.model.Wte.Weight.Value.CopyFrom(tensor.FromFloat32s(tensor.CPU(), wte, cfg.Vocab, cfg.Width))
	b := captureStderr(t, func() { err = showSamples(tr, task, task, o, nil) })
	require.NoError(t, err)
	require.NotContains(t, b, "\x1b", "%q", b)
	require.Contains(t, b, `=\x1b\x1b\x1b\x1b\x1b  WRONG, want `, "%q", b)
}
