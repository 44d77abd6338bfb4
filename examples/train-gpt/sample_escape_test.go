package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
