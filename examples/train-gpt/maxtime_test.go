package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
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

// A signal that comes after a -max-time stop (while the weights are
// written) no longer says "the run is complete": the run stopped short of
// -steps, and its state holds the rest.
func TestSignalAfterMaxTimeStop(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"max-time-signal", 3, []string{"-batch", "2", "-eval-every", "0"}}
	o, err := parseFlags(c.args(dir, "cpu", "-max-time", "1ns"))
	require.NoError(t, err)
	o.stopAt = 1
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.NotContains(t, ex.Msg, "the run is complete")
	require.Contains(t, ex.Msg, "after -max-time stopped the run at step 1 of 3: continue the run with -resume "+filepath.Join(dir, "state.safetensors"))
}
