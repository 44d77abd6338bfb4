package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run that -max-time stops before -steps saves its training state, as
// an interrupt does, so that -resume continues it (it used to save only
// the weights, and the rest of the run could not be trained).
func TestMaxTimeSavesState(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"max-time", 3, []string{"-batch", "2", "-eval-every", "0"}}
	o, err := parseFlags(c.args(dir, "cpu", "-max-time", "1ns"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	log, err := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(log), "\n"), "stopped after the first step")

	o, err = parseFlags(c.args(dir, "cpu", "-resume", filepath.Join(dir, "state.safetensors")))
	require.NoError(t, err)
	require.NoError(t, run(o))
	log, err = os.ReadFile(filepath.Join(dir, "loss.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(log), "\n"), "resumed to the end")
}
