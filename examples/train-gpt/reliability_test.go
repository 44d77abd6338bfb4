package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// The reliability review's findings: a failure at the end of a run, or in
// an evaluation, saves the training state; a state of a complete run
// writes its weights; a second signal during any atomic write leaves no
// temporary file; a -max-time stop logs what the uninterrupted run logs;
// two runs on the same outputs are refused; a bad STRATA_HOST_MEMORY is
// a bad setting.

var relCase = resumeCase{"rel", 6, []string{"-batch", "4", "-dropout", "0.1", "-warmup", "2", "-eval-every", "2"}}

// reference runs c uninterrupted in a directory of its own and returns
// its loss log and weights.
func reference(t *testing.T, c resumeCase, extra ...string) (log, w []byte) {
	dir := t.TempDir()
	o, err := parseFlags(c.args(dir, "cpu", extra...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	return readFile(t, filepath.Join(dir, "loss.jsonl")), readFile(t, filepath.Join(dir, "w.safetensors"))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// captureStderr runs f with os.Stderr a file of the test's and returns
// what f wrote there.
func captureStderr(t *testing.T, f func()) string {
	path := filepath.Join(t.TempDir(), "stderr")
	fh, err := os.Create(path)
	require.NoError(t, err)
	old := os.Stderr
	os.Stderr = fh
	defer func() { os.Stderr = old; fh.Close() }()
	f()
	return string(readFile(t, path))
}

// 1a, 1c: the final weights' save fails (a full disk, a deleted
// directory): the run saves its training state and says where; -resume
// of that state (at step == -steps) writes the weights and exits 0.
func TestFinalWeightsFailureSavesState(t *testing.T) {
	wantLog, wantW := reference(t, relCase)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.safetensors")
	saveWeightsFile = func(context.Context, string, []*nn.Parameter, map[string]string) error {
		return errors.New("no space left on device (test)")
	}
	t.Cleanup(func() { saveWeightsFile = nn.SaveWeightsContext })
	o, err := parseFlags(relCase.args(dir, "cpu"))
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "no space left on device (test)")
	require.ErrorContains(t, err, fmt.Sprintf("saved the training state after step 6 to %s", state))
	var ex *cli.ExitError
	require.False(t, errors.As(err, &ex), "status 1")
	meta, err := tensor.ReadSafetensorsMetadata(state)
	require.NoError(t, err)
	require.Equal(t, "6", meta[keyStep])

	saveWeightsFile = nn.SaveWeightsContext
	o, err = parseFlags(relCase.args(dir, "cpu", "-resume", state))
	require.NoError(t, err)
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	require.Contains(t, out, "nothing left to train: wrote the weights of step 6 to "+filepath.Join(dir, "w.safetensors"))
	require.True(t, bytes.Equal(wantW, readFile(t, filepath.Join(dir, "w.safetensors"))), "the complete run's weights")
	require.Equal(t, string(wantLog), string(readFile(t, filepath.Join(dir, "loss.jsonl"))))
}

// 1c: with -save-every dividing -steps, the state saved at the last step
// is usable: -resume writes its weights.
func TestResumeOfCompleteStateWritesWeights(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"complete", 4, []string{"-batch", "4", "-save-every", "2"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	w := filepath.Join(dir, "w.safetensors")
	want := readFile(t, w)
	require.NoError(t, os.Remove(w))
	o, err = parseFlags(c.args(dir, "cpu", "-resume", filepath.Join(dir, "state.safetensors")))
	require.NoError(t, err)
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	require.Contains(t, out, "nothing left to train: wrote the weights of step 4 to "+w)
	require.True(t, bytes.Equal(want, readFile(t, w)))
}

// 1b, 6: an evaluation that fails (out of memory) names the step and the
// phase, saves the training state, and the resumed run ends with the
// uninterrupted run's loss log and weights.
func TestEvaluationFailureSavesState(t *testing.T) {
	wantLog, wantW := reference(t, relCase)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.safetensors")
	calls := 0
	evaluateFn = func(tr *trainer, data dataset, task *additionTask) (string, float64, error) {
		if calls++; calls == 2 {
			return "", 0, fmt.Errorf("tensor.MatMulBias: allocating: %w", memory.ErrOutOfMemory)
		}
		return evaluate(tr, data, task)
	}
	t.Cleanup(func() { evaluateFn = evaluate })
	o, err := parseFlags(relCase.args(dir, "cpu"))
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "step 4, evaluation: tensor.MatMulBias: allocating")
	require.ErrorContains(t, err, fmt.Sprintf("saved the training state after step 4 to %s", state))
	evaluateFn = evaluate
	o, err = parseFlags(relCase.args(dir, "cpu", "-resume", state))
	require.NoError(t, err)
	require.NoError(t, run(o))
	require.Equal(t, string(wantLog), string(readFile(t, filepath.Join(dir, "loss.jsonl"))), "losses")
	require.True(t, bytes.Equal(wantW, readFile(t, filepath.Join(dir, "w.safetensors"))), "weights")
}

// 1d: a signal in the last step says the weights are saved, not the
// training state.
func TestInterruptNoteInLastStep(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags(relCase.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = relCase.steps
	out := captureStderr(t, func() { err = run(o) })
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Contains(t, out, "then saving the weights to "+filepath.Join(dir, "w.safetensors"))
	require.NotContains(t, out, "then saving the training state")
}

// 2: a second signal during any atomic write (the loss plot, the loss
// log's rewrite on resume, the start's writability probes) abandons it
// cleanly: status 130, no temporary file left, the process not killed
// mid-write.
func TestSecondSignalDuringAnyWrite(t *testing.T) {
	exitProcess = func(code int) { t.Fatalf("os.Exit(%d) in the middle of a write", code) }
	t.Cleanup(func() { exitProcess = os.Exit })
	c := resumeCase{"writes", 4, []string{"-batch", "4", "-loss-plot", "", "-save-every", "2"}}
	for _, what := range []string{"-loss-plot", "-loss-log", "probe"} {
		t.Run(what, func(t *testing.T) {
			dir := t.TempDir()
			plot := filepath.Join(dir, "w.loss.png")
			var extra []string
			if what == "-loss-log" {
				o, err := parseFlags(c.args(dir, "cpu"))
				require.NoError(t, err)
				o.stopAt = 2
				require.Error(t, run(o))
				extra = []string{"-resume", filepath.Join(dir, "state.safetensors")}
			}
			before := testfs.Names(t, dir)
			o, err := parseFlags(c.args(dir, "cpu", append(extra, "-loss-plot", plot)...))
			require.NoError(t, err)
			o.stopWriting = what
			err = run(o)
			var ex *cli.ExitError
			require.True(t, errors.As(err, &ex), "%v", err)
			require.Equal(t, 130, ex.Code, ex.Msg)
			for _, n := range testfs.Names(t, dir) {
				require.NotContains(t, n, ".tmp", "a temporary file left")
			}
			if what != "-loss-plot" {
				require.Equal(t, before, testfs.Names(t, dir), "nothing written")
			}
		})
	}
}

// 3: a run stopped by -max-time and resumed logs what the uninterrupted
// run logs, bit for bit (the stop used to evaluate and log a held-out
// loss the uninterrupted run has not).
func TestMaxTimeResumeLogsLikeUninterrupted(t *testing.T) {
	c := resumeCase{"max-time", 5, []string{"-batch", "4", "-eval-every", "0", "-dropout", "0.1"}}
	wantLog, wantW := reference(t, c)
	dir := t.TempDir()
	o, err := parseFlags(c.args(dir, "cpu", "-max-time", "1ns"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(c.args(dir, "cpu", "-resume", filepath.Join(dir, "state.safetensors")))
	require.NoError(t, err)
	require.NoError(t, run(o))
	require.Equal(t, string(wantLog), string(readFile(t, filepath.Join(dir, "loss.jsonl"))), "losses")
	require.True(t, bytes.Equal(wantW, readFile(t, filepath.Join(dir, "w.safetensors"))), "weights")
}

// 4: a second run on the same outputs, while the first holds them, is
// refused (status 2) and writes nothing; the lock goes with the run.
func TestSecondRunOnSameOutputsRefused(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"lock", 2, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	release, err := lockOutputs(o) // the first run's lock (flock: per open file, so it excludes this process too)
	require.NoError(t, err)
	before := testfs.Names(t, dir)
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 2, ex.Code)
	require.Contains(t, ex.Msg, "another train-gpt run")
	require.Contains(t, ex.Msg, fmt.Sprintf("pid %d", os.Getpid()))
	require.Equal(t, before, testfs.Names(t, dir), "nothing written")
	release()
	require.NoError(t, run(o))
	for _, n := range testfs.Names(t, dir) {
		require.False(t, strings.HasSuffix(n, ".lock"), "the lock file is removed at the end: %s", n)
	}
}

// 5: a malformed or too small STRATA_HOST_MEMORY is a bad setting.
func TestBadHostMemoryEnvRefused(t *testing.T) {
	for _, v := range []string{"abc", "1MiB"} {
		t.Setenv(memory.EnvHostMemory, v)
		_, err := parseFlags([]string{"-device", "cpu"})
		require.ErrorContains(t, err, fmt.Sprintf("%s=%q: ", memory.EnvHostMemory, v), v)
		require.NotContains(t, err.Error(), "\n")
		require.NotContains(t, err.Error(), "using the default")
	}
	for _, v := range []string{"off", "64MiB", "50%"} {
		t.Setenv(memory.EnvHostMemory, v)
		_, err := parseFlags([]string{"-device", "cpu"})
		require.NoError(t, err, v)
	}
}
