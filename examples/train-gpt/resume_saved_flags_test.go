package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// savedFlagsRun is a run whose flags are not the defaults: its state
// (-out's, by default) is resumed with -resume alone.
func savedFlagsRun(dir string) []string {
	return []string{"-device", "cpu", "-quiet", "-steps", "6", "-batch", "4", "-lr", "3e-3", "-min-lr", "1e-4",
		"-warmup", "2", "-weight-decay", "0.05", "-clip", "0.5", "-dropout", "0.1", "-eval-every", "3",
		"-out", filepath.Join(dir, "mine.safetensors"), "-loss-log", filepath.Join(dir, "loss.jsonl")}
}

// interruptSavedRun runs savedFlagsRun(dir) interrupted after step 2 and
// returns the path of its training state and the run's error.
func interruptSavedRun(t *testing.T, dir string) (string, error) {
	t.Helper()
	o, err := parseFlags(savedFlagsRun(dir))
	require.NoError(t, err)
	o.stopAt = 2
	return filepath.Join(dir, "mine.state.safetensors"), run(o)
}

// TestResumeTakesSavedFlags: "-resume FILE" alone, as the interrupt's
// message says, continues the run exactly: the flags not given take the
// saved run's values (-out, -state, -loss-log, -eval-every, the schedule,
// -dropout, -batch), so the weights go to the run's -out, not to a
// gpt.safetensors of the current directory, and the losses and weights
// are the uninterrupted run's bit for bit. They took the program's
// defaults (-out gpt.safetensors, -steps 6000, -lr 2e-3...), overwriting
// any gpt.safetensors there.
func TestResumeTakesSavedFlags(t *testing.T) {
	ref := t.TempDir()
	o, err := parseFlags(savedFlagsRun(ref))
	require.NoError(t, err)
	require.NoError(t, run(o))
	wantLog := readFile(t, filepath.Join(ref, "loss.jsonl"))
	wantW := readFile(t, filepath.Join(ref, "mine.safetensors"))

	dir := t.TempDir()
	state, err := interruptSavedRun(t, dir)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 130, ex.Code)
	require.Contains(t, ex.Msg, "continue the run with -resume "+state)

	cwd := t.TempDir() // where a default -out would go
	t.Chdir(cwd)
	require.NoError(t, os.WriteFile("gpt.safetensors", []byte("another run's weights"), 0o644))
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "mine.safetensors"), o.out)
	require.Equal(t, state, o.state)
	require.Equal(t, filepath.Join(dir, "loss.jsonl"), o.lossLog)
	require.Equal(t, filepath.Join(dir, "mine.loss.png"), o.lossPlot)
	require.Equal(t, 3, o.evalEvery)
	require.Equal(t, 6, o.steps)
	require.Equal(t, 4, o.batch)
	require.Equal(t, 3e-3, o.lr)
	require.Equal(t, 1e-4, o.minLR)
	require.Equal(t, 2, o.warmup)
	require.Equal(t, 0.05, o.wd)
	require.Equal(t, 0.5, o.clip)
	require.Equal(t, 0.1, o.dropout)
	require.True(t, o.dropSet)
	require.Equal(t, "fp32", o.precision)
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	require.NotContains(t, out, "note:", "nothing differs from the saved run")
	require.Contains(t, out, "train-gpt: -resume: the flags not given are the saved run's: ")
	require.Contains(t, out, "-out "+filepath.Join(dir, "mine.safetensors"))
	require.Equal(t, "another run's weights", string(readFile(t, "gpt.safetensors")), "gpt.safetensors untouched")
	require.Equal(t, []string{"gpt.safetensors"}, testfs.Names(t, cwd), "nothing written in the current directory")
	require.Equal(t, string(wantLog), string(readFile(t, filepath.Join(dir, "loss.jsonl"))), "losses")
	require.True(t, bytes.Equal(wantW, readFile(t, filepath.Join(dir, "mine.safetensors"))), "final weights")
}

// A flag given with -resume keeps its value, with the note it had when it
// differs from the saved run; the others are the saved run's.
func TestResumeGivenFlagWins(t *testing.T) {
	dir := t.TempDir()
	state, err := interruptSavedRun(t, dir)
	require.Error(t, err)
	other := filepath.Join(t.TempDir(), "other.safetensors")
	o, err := parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state, "-steps", "8", "-lr", "1e-3", "-out", other})
	require.NoError(t, err)
	require.Equal(t, 8, o.steps)
	require.Equal(t, 1e-3, o.lr)
	require.Equal(t, 1e-4, o.minLR, "the saved -min-lr: not above the new -lr")
	require.Equal(t, other, o.out)
	require.Equal(t, state, o.state, "the saved -state, not one derived from the new -out")
	require.Equal(t, 2, o.warmup)
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	require.Contains(t, out, "train-gpt: note: steps is 8 now, 6 in the saved run; the resumed run follows the new value")
	require.Contains(t, out, "train-gpt: note: lr is 0.001 now, 0.003 in the saved run; the resumed run follows the new value")
	require.NotContains(t, out, "min_lr is")
	_, err = os.Stat(other)
	require.NoError(t, err, "the weights are written to the -out given")
	_, err = os.Stat(filepath.Join(dir, "mine.safetensors"))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A -min-lr saved above a new -lr is not taken: -lr/10, as before.
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state, "-lr", "5e-5"})
	require.NoError(t, err)
	require.InDelta(t, 5e-6, o.minLR, 1e-18)
}

// rewriteMetadata rewrites the safetensors file path with its metadata
// changed by edit (the tensors' bytes as they were).
func rewriteMetadata(t *testing.T, path string, edit func(meta map[string]string)) {
	b := readFile(t, path)
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &hdr))
	var meta map[string]string
	require.NoError(t, json.Unmarshal(hdr["__metadata__"], &meta))
	edit(meta)
	m, err := json.Marshal(meta)
	require.NoError(t, err)
	hdr["__metadata__"] = m
	h, err := json.Marshal(hdr)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, binary.Write(&out, binary.LittleEndian, uint64(len(h))))
	out.Write(h)
	out.Write(b[8+n:])
	require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
}

// A state saved before the outputs were recorded (no train.outputs, and a
// train.run without some keys) still resumes: the flags it lacks take
// their defaults, as they did.
func TestResumeOldStateWithoutSavedFlags(t *testing.T) {
	dir := t.TempDir()
	state, err := interruptSavedRun(t, dir)
	require.Error(t, err)
	meta, err := tensor.ReadSafetensorsMetadata(state)
	require.NoError(t, err)
	require.Contains(t, meta, keyOutputs)
	rewriteMetadata(t, state, func(meta map[string]string) {
		delete(meta, keyOutputs)
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(meta[keyRun]), &r))
		delete(r, "warmup")
		b, err := json.Marshal(r)
		require.NoError(t, err)
		meta[keyRun] = string(b)
	})
	t.Chdir(t.TempDir())
	o, err := parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state})
	require.NoError(t, err)
	require.Equal(t, "gpt.safetensors", o.out, "no -out recorded: the default, as before")
	require.Equal(t, "gpt.state.safetensors", o.state)
	require.Equal(t, 500, o.evalEvery)
	require.Equal(t, 100, o.warmup, "no warmup recorded: the default")
	require.Equal(t, 6, o.steps, "recorded in train.run")
	require.Equal(t, 3e-3, o.lr)
	w := filepath.Join(t.TempDir(), "w.safetensors")
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state, "-out", w, "-warmup", "2", "-eval-every", "3"})
	require.NoError(t, err)
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	require.False(t, strings.Contains(out, "the flags not given are the saved run's: -out"), out)
	_, err = os.Stat(w)
	require.NoError(t, err)
}

// TestResumeSaysWhichPathsAreTheSavedRuns: a state resumed where the
// saved run's paths are gone (copied to another machine, its directory
// moved) was refused with "-data: stat /old/text.txt: no such file" or
// "-out: cannot write /old/w.safetensors", naming flags the command line
// did not give. The message now says the path is the saved run's, taken
// by -resume, and to give the flag for another; a path given has no such
// note.
func TestResumeSaysWhichPathsAreTheSavedRuns(t *testing.T) {
	text := textFile(t)
	dir := t.TempDir()
	c := resumeCase{"text", 4, []string{"-batch", "2", "-sample", "0"}}
	o, err := parseFlags(c.args(dir, "cpu", "-data", text))
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o))
	state := filepath.Join(t.TempDir(), "moved.safetensors")
	require.NoError(t, os.WriteFile(state, readFile(t, filepath.Join(dir, "state.safetensors")), 0o644))
	require.NoError(t, os.RemoveAll(dir))
	moved := filepath.Join(t.TempDir(), "moved.txt")
	require.NoError(t, os.Rename(text, moved))

	resume := func(args ...string) error {
		o, err := parseFlags(append([]string{"-device", "cpu", "-quiet", "-resume", state}, args...))
		require.NoError(t, err)
		return run(o)
	}
	err = resume()
	require.ErrorContains(t, err, "-data: stat "+text+": ")
	require.ErrorContains(t, err, " (the saved run's -data, taken by -resume "+state+": give -data to use another)")
	err = resume("-data", moved)
	require.ErrorContains(t, err, "-out: cannot write "+filepath.Join(dir, "w.safetensors"))
	require.ErrorContains(t, err, " (the saved run's -out, taken by -resume "+state+": give -out to use another)")
	err = resume("-data", text)
	require.ErrorContains(t, err, "-data: stat "+text+": ")
	require.NotContains(t, err.Error(), "the saved run's")
}
