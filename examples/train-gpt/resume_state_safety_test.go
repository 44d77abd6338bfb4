package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/tensor"
)

// TestResumeGradDTypeFromState: "-resume STATE" alone continues a
// -precision bf16 -grad-dtype bf16 run bit for bit. -grad-dtype was not
// recorded in the state before session 40 (a reviewer helper found it),
// so the resumed run trained with float32 gradients, silently.
func TestResumeGradDTypeFromState(t *testing.T) {
	c := resumeCase{"bf16-grads", 10, []string{"-batch", "32", "-warmup", "3", "-precision", "bf16", "-grad-dtype", "bf16"}}
	a, b := t.TempDir(), t.TempDir()
	o, err := parseFlags(c.args(a, "cpu"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(c.args(b, "cpu"))
	require.NoError(t, err)
	o.stopAt = 5
	var ex *cli.ExitError
	require.True(t, errors.As(run(o), &ex))
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", filepath.Join(b, "state.safetensors")})
	require.NoError(t, err)
	require.Equal(t, "bf16", o.gradDType, "the saved run's -grad-dtype")
	require.NoError(t, run(o))
	for _, f := range []string{"loss.jsonl", "w.safetensors"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(b, f))
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), "%s differs:\n%s\n%s", f, x, y)
	}
}

// TestLossLogWriteErrorSavesState: a -loss-log write that fails mid-run
// (a full disk) saves the training state before the run ends, as a failed
// evaluation does. It ended the run without saving before session 40 (a
// reviewer helper found it): every step since the last save was lost.
func TestLossLogWriteErrorSavesState(t *testing.T) {
	t.Cleanup(func() { wrapOutput = func(w io.WriteCloser) io.WriteCloser { return w } })
	dir := t.TempDir()
	state := filepath.Join(dir, "s.safetensors")
	wrapOutput = func(w io.WriteCloser) io.WriteCloser { return &failingWriter{w: w, ok: 6} }
	o, err := parseFlags([]string{"-steps", "20", "-batch", "4", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", filepath.Join(dir, "w.safetensors"),
		"-loss-plot", "off", "-loss-log", filepath.Join(dir, "l.jsonl"), "-state", state})
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "no space left on device (test)")
	_, serr := os.Stat(state)
	require.NoError(t, serr, "the training state after the steps trained is saved: %v", err)
	require.ErrorContains(t, err, "saved the training state after step 7")
}

// TestNewRunKeepsInterruptedState: the same command run again without
// -resume after an interrupt is refused rather than let its first save
// replace the interrupted run's state (before session 40 the steps it
// held were lost with no word; a reviewer helper found it).
func TestNewRunKeepsInterruptedState(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"x", 10, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = 6
	require.Error(t, run(o)) // status 130, the state after step 6 saved
	state := filepath.Join(dir, "state.safetensors")

	o, err = parseFlags(c.args(dir, "cpu")) // the same command, -resume forgotten
	require.NoError(t, err)
	o.stopAt = 2
	err = run(o)
	meta, merr := tensor.ReadSafetensorsMetadata(state)
	require.NoError(t, merr)
	require.Equal(t, "6", meta[keyStep], "the interrupted run's state was replaced (run: %v)", err)
	require.ErrorContains(t, err, "interrupted run")
}

// TestResumeKeepsAnotherRunsState: "-resume A -state B", where B holds
// another interrupted run's state, is refused naming both files rather
// than let the resumed run's first save replace B (the check of a new
// run's -state was skipped for any -resume, so B's steps were lost with
// no word). -state the file resumed, or a new file, still resumes.
func TestResumeKeepsAnotherRunsState(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	interrupted := func(dir string, at int, seed string) string {
		o, err := parseFlags(resumeCase{"x", 10, []string{"-batch", "4", "-seed", seed}}.args(dir, "cpu"))
		require.NoError(t, err)
		o.stopAt = at
		require.Error(t, run(o)) // status 130, the state after step at saved
		return filepath.Join(dir, "state.safetensors")
	}
	stateA, stateB := interrupted(a, 6, "1"), interrupted(b, 4, "2")

	o, err := parseFlags([]string{"-device", "cpu", "-quiet", "-resume", stateA, "-state", stateB})
	require.NoError(t, err)
	o.stopAt = 8
	err = run(o)
	meta, merr := tensor.ReadSafetensorsMetadata(stateB)
	require.NoError(t, merr)
	require.Equal(t, "4", meta[keyStep], "the other run's state was replaced (run: %v)", err)
	require.ErrorContains(t, err, "-state "+stateB+": holds an interrupted run's training state (step 4 of 10), which the run resumed from -resume "+stateA+" would replace")

	fresh := filepath.Join(a, "fresh.safetensors")
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", stateA, "-state", fresh})
	require.NoError(t, err)
	o.stopAt = 8
	require.Error(t, run(o)) // status 130, saved to fresh
	meta, err = tensor.ReadSafetensorsMetadata(fresh)
	require.NoError(t, err)
	require.Equal(t, "8", meta[keyStep])

	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", stateA})
	require.NoError(t, err)
	require.NoError(t, run(o), "-state the file resumed (the saved run's)")
}

// TestOutputsKeepInterruptedState: an output other than -state (-out,
// -loss-log, -loss-plot, -cpuprofile) naming a file that holds an
// interrupted run's training state is refused before any work, as -state
// is: -loss-log and -cpuprofile truncated it at the start, -out replaced
// it with the weights at the end, and the steps it held were lost with
// no word.
func TestOutputsKeepInterruptedState(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"x", 10, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = 6
	require.Error(t, run(o)) // status 130, the state after step 6 saved
	state := filepath.Join(dir, "state.safetensors")

	for _, name := range []string{"-out", "-loss-log", "-loss-plot", "-cpuprofile"} {
		other := t.TempDir()
		args := []string{"-device", "cpu", "-quiet", "-steps", "2", "-batch", "4", "-out", filepath.Join(other, "w.safetensors"), name, state}
		o, err := parseFlags(args)
		require.NoError(t, err, name)
		err = run(o)
		meta, merr := tensor.ReadSafetensorsMetadata(state)
		require.NoError(t, merr, "%s replaced the interrupted run's state (run: %v)", name, err)
		require.Equal(t, "6", meta[keyStep], name)
		require.ErrorContains(t, err, name+" "+state+": holds an interrupted run's training state (step 6 of 10)")
	}
}
