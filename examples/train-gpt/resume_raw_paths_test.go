package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumeKeepsPathsThatAreNotUTF8: the training state records the
// run's -data and outputs for "-resume FILE" alone to continue the run;
// a path that is not valid UTF-8 (a Linux file name is bytes) was
// recorded with U+FFFD in place of its bad bytes (encoding/json), so the
// resumed run looked for other data, and wrote its weights and state to
// other files, silently.
func TestResumeKeepsPathsThatAreNotUTF8(t *testing.T) {
	dir := t.TempDir()
	text, err := os.ReadFile(textFile(t))
	require.NoError(t, err)
	data := filepath.Join(dir, "text\xfe.txt")
	require.NoError(t, os.WriteFile(data, text, 0o644))
	out := filepath.Join(dir, "w\xff.safetensors")
	state := filepath.Join(dir, "w\xff.state.safetensors")
	o, err := parseFlags([]string{"-device", "cpu", "-quiet", "-steps", "4", "-batch", "2", "-eval-every", "0", "-sample", "0",
		"-data", data, "-out", out, "-loss-plot", "off"})
	require.NoError(t, err)
	require.Equal(t, state, o.state)
	o.stopAt = 2
	require.Error(t, run(o))
	_, err = os.Stat(state)
	require.NoError(t, err)

	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state})
	require.NoError(t, err)
	require.Equal(t, data, o.data)
	require.Equal(t, out, o.out)
	require.Equal(t, state, o.state)
	require.NoError(t, run(o))
	_, err = os.Stat(out)
	require.NoError(t, err, "the weights at the run's -out")
}
