package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestResumeRefusalsAreBadFlags: a -resume the other flags contradict (a
// state of another run, or one that -steps leaves nothing to train) is a
// bad flag, status 2, as the same state with no -out to write its weights
// to was; a file of weights given to -resume is refused with the flags,
// before the data is read and the model made, saying to start from it
// with -init. They ended the run with status 1, the weights' after the
// data and the model, as "not a train-gpt training state file (metadata
// train.run = \"\")".
func TestResumeRefusalsAreBadFlags(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"x", 4, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(dir, "state.safetensors")
	for extra, msg := range map[string]string{
		"-batch 8":     "saved by a run with batches of 4 x 12 tokens, this one has 8 x 12",
		"-config char": "saved by a -config tiny run",
		"-steps 1":     "the run is at step 2, -steps 1 leaves nothing to train",
	} {
		o, err := parseFlags(append(c.args(t.TempDir(), "cpu", strings.Fields(extra)...), "-resume", state))
		require.NoError(t, err)
		err = run(o)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%s: %v", extra, err)
		require.Equal(t, 2, ex.Code, extra)
		require.Contains(t, ex.Msg, msg, extra)
	}
	w := filepath.Join(dir, "weights-only.safetensors")
	o, err = parseFlags(resumeCase{"x", 1, []string{"-batch", "4"}}.args(t.TempDir(), "cpu", "-out", w))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(append(c.args(t.TempDir(), "cpu"), "-resume", w))
	require.NoError(t, err)
	out := captureStderr(t, func() { err = run(o) })
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 2, ex.Code)
	require.Contains(t, ex.Msg, "-resume "+w+": weights, not a training state: start a run from them with -init")
	require.NotContains(t, out, "model:", "refused before the model is made")
}
