package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// resumeCase is a short run: its flags (in dir) and the steps it trains.
type resumeCase struct {
	name  string
	steps int
	flags []string
}

func (c resumeCase) args(dir, device string, extra ...string) []string {
	a := []string{"-device", device, "-quiet", "-steps", fmt.Sprint(c.steps), "-eval-every", "4",
		"-out", filepath.Join(dir, "w.safetensors"), "-loss-log", filepath.Join(dir, "loss.jsonl"),
		"-state", filepath.Join(dir, "state.safetensors")}
	return append(append(a, c.flags...), extra...)
}

// textFile writes a small corpus for the text task.
func textFile(t *testing.T) string {
	var b strings.Builder
	for i := range 800 {
		fmt.Fprintf(&b, "line %d: the quick brown fox %d jumps over %d lazy dogs.\n", i, i*7%13, i%5)
	}
	path := filepath.Join(t.TempDir(), "text.txt")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func resumeCases(t *testing.T) []resumeCase {
	text := textFile(t)
	return []resumeCase{
		// The addition task in float32 with dropout: the data generator,
		// the dropout stream, AdamW's moments and step, the schedule.
		{"addition-fp32-dropout", 12, []string{"-batch", "16", "-dropout", "0.1", "-warmup", "3"}},
		// Text in fp16 with the gradient scaler (its scale and good-step
		// count), checkpointed blocks and no clipping.
		{"text-fp16-checkpoint", 10, []string{"-data", text, "-batch", "4", "-precision", "fp16", "-checkpoint", "blocks",
			"-clip", "0", "-sample", "0", "-dropout", "0.1", "-lr", "3e-3"}},
	}
}

// runResume trains c without interruption in one directory and, in
// another, interrupted after step stop and then resumed; it returns the
// loss logs and weight files of both.
func runResume(t *testing.T, c resumeCase, device string, stop int) (full, resumed [2][]byte) {
	a, b := t.TempDir(), t.TempDir()
	o, err := parseFlags(c.args(a, device))
	require.NoError(t, err)
	require.NoError(t, run(o))

	o, err = parseFlags(c.args(b, device))
	require.NoError(t, err)
	o.stopAt = stop
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.Contains(t, ex.Msg, fmt.Sprintf("after step %d of %d: saved the training state to %s", stop, c.steps, filepath.Join(b, "state.safetensors")))
	_, err = os.Stat(filepath.Join(b, "w.safetensors"))
	require.ErrorIs(t, err, os.ErrNotExist, "an interrupted run does not write -out")
	require.Equal(t, []string{"loss.jsonl", "state.safetensors"}, testfs.Names(t, b), "no temporary files")

	o, err = parseFlags(c.args(b, device, "-resume", filepath.Join(b, "state.safetensors")))
	require.NoError(t, err)
	require.NoError(t, run(o))
	read := func(dir string) [2][]byte {
		l, err := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
		require.NoError(t, err)
		w, err := os.ReadFile(filepath.Join(dir, "w.safetensors"))
		require.NoError(t, err)
		return [2][]byte{l, w}
	}
	return read(a), read(b)
}

// TestResumeIsBitIdentical: a run interrupted after step k and resumed
// from its training state gives the losses of the uninterrupted run bit
// for bit (the loss log prints float32 losses exactly) and the same final
// weights, byte for byte.
func TestResumeIsBitIdentical(t *testing.T) {
	for _, c := range resumeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			full, resumed := runResume(t, c, "cpu", 5)
			require.Equal(t, c.steps, bytes.Count(full[0], []byte("\n")))
			require.Equal(t, string(full[0]), string(resumed[0]), "losses")
			require.True(t, bytes.Equal(full[1], resumed[1]), "final weights")
		})
	}
}

// The same on the GPU (skipped without one): whether a GPU resume is bit
// for bit too.
func TestResumeIsBitIdenticalGPU(t *testing.T) {
	gpuDevice(t)
	for _, c := range resumeCases(t) {
		t.Run(c.name, func(t *testing.T) {
			full, resumed := runResume(t, c, "cuda", 5)
			require.Equal(t, string(full[0]), string(resumed[0]), "losses")
			require.True(t, bytes.Equal(full[1], resumed[1]), "final weights")
		})
	}
}

// A resumed run refuses a state of another run, and a state that has
// nothing left to train.
func TestResumeRefusesAnotherRun(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"x", 4, []string{"-batch", "4"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(dir, "state.safetensors")
	for extra, msg := range map[string]string{
		"-batch 8":     "saved by a run with batches of 4 x 12 tokens, this one has 8 x 12",
		"-digits 2":    "saved by a -digits 3 run, this one is -digits 2",
		"-config char": "saved by a -config tiny run",
		"-steps 1":     "the run is at step 2, -steps 1 leaves nothing to train",
	} {
		o, err := parseFlags(append(c.args(t.TempDir(), "cpu", strings.Fields(extra)...), "-resume", state))
		require.NoError(t, err)
		require.ErrorContains(t, run(o), msg, extra)
	}
	w := filepath.Join(dir, "weights-only.safetensors")
	o, err = parseFlags(resumeCase{"x", 1, []string{"-batch", "4"}}.args(t.TempDir(), "cpu", "-out", w))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(append(c.args(t.TempDir(), "cpu"), "-resume", w))
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "weights, not a training state: start a run from them with -init")
}

// Real signals, to a child process: SIGINT, SIGTERM and SIGHUP (a closed
// terminal; it killed the run before session 40) finish the step, save
// the state and exit with 130, 143 and 129, leaving no temporary file;
// SIGKILL after -save-every saves loses only the steps since the last
// one. In each case the resumed run ends with the uninterrupted run's loss
// log and weights.
func TestSignalsAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("runs subprocesses for seconds")
	}
	c := resumeCase{"signals", 60, []string{"-batch", "32", "-dropout", "0.1", "-save-every", "10"}}
	ref := t.TempDir()
	o, err := parseFlags(c.args(ref, "cpu"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	want, err := os.ReadFile(filepath.Join(ref, "loss.jsonl"))
	require.NoError(t, err)
	wantW, err := os.ReadFile(filepath.Join(ref, "w.safetensors"))
	require.NoError(t, err)

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			// Signal once some steps (more than one save) are done.
			cmd, stderr := startLogging(t, dir, c, 15)
			require.NoError(t, cmd.Process.Signal(sig))
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "%v: %s", err, stderr.String())
			switch sig {
			case syscall.SIGKILL:
				require.Equal(t, -1, ee.ExitCode(), "killed")
			default:
				require.Equal(t, 128+int(sig), ee.ExitCode(), stderr.String())
				require.Contains(t, stderr.String(), "saved the training state to")
				require.Equal(t, []string{"loss.jsonl", "state.safetensors"}, testfs.Names(t, dir), "no temporary file")
			}
			cmd = mainCmd(t, dir, nil, c.args(dir, "cpu", "-resume", filepath.Join(dir, "state.safetensors"))...)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, string(out))
			got, err := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "losses")
			gotW, err := os.ReadFile(filepath.Join(dir, "w.safetensors"))
			require.NoError(t, err)
			require.True(t, bytes.Equal(wantW, gotW), "weights")
		})
	}
}

// A signal during the last step leaves nothing to resume: the run is
// complete, so it saves its weights (the uninterrupted run's) and exits
// with 130, instead of saving a state that -resume refuses ("-steps 4
// leaves nothing to train") and no weights.
func TestInterruptInLastStepSavesWeights(t *testing.T) {
	c := resumeCase{"last", 4, []string{"-batch", "4"}}
	ref := t.TempDir()
	o, err := parseFlags(c.args(ref, "cpu"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	want, err := os.ReadFile(filepath.Join(ref, "w.safetensors"))
	require.NoError(t, err)

	dir := t.TempDir()
	o, err = parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopAt = c.steps
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.Contains(t, ex.Msg, "the run is complete")
	got, err := os.ReadFile(filepath.Join(dir, "w.safetensors"))
	require.NoError(t, err, "the complete run's weights are saved")
	require.True(t, bytes.Equal(want, got), "weights")
}

// A second signal while the training state is being saved quits at once:
// the save is abandoned (no temporary file, the previous state kept) and
// the exit status is still 128 + the signal, not 1.
func TestSecondSignalWhileSaving(t *testing.T) {
	dir := t.TempDir()
	c := resumeCase{"again", 6, []string{"-batch", "4", "-save-every", "2"}}
	o, err := parseFlags(c.args(dir, "cpu"))
	require.NoError(t, err)
	o.stopSaving = 4
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.Contains(t, ex.Msg, "interrupt again while saving the training state after step 4")
	require.Equal(t, []string{"loss.jsonl", "state.safetensors"}, testfs.Names(t, dir), "no temporary file")
	meta, err := tensor.ReadSafetensorsMetadata(filepath.Join(dir, "state.safetensors"))
	require.NoError(t, err)
	require.Equal(t, "2", meta[keyStep], "the state saved after step 2 is kept")
}

// startLogging starts train-gpt on case c in dir as a child process and
// returns once its loss log holds n lines (or a minute has passed), with
// the buffer its standard error goes to.
func startLogging(t *testing.T, dir string, c resumeCase, n int) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := mainCmd(t, dir, nil, c.args(dir, "cpu")...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, _ := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
		if bytes.Count(l, []byte("\n")) >= n || time.Now().After(deadline) {
			return cmd, stderr
		}
		time.Sleep(time.Millisecond)
	}
}
