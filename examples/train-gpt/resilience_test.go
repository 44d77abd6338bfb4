package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// envMainArgs makes the test binary run main with these arguments (a JSON
// list) instead of the tests: the subprocess tests exercise exit codes and
// real signals.
const envMainArgs = "TRAIN_GPT_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if a := os.Getenv(envMainArgs); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			panic(err)
		}
		os.Args = append([]string{"train-gpt"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mainCmd is this test binary running main with args, in dir. The
// binary is found by os.Executable, not os.Args[0]: a test binary run by
// a relative path (../../.gpu/train-gpt.test on the GPU machine) was not
// found from dir, and every subprocess test failed.
func mainCmd(t *testing.T, dir string, env []string, args ...string) *exec.Cmd {
	a, err := json.Marshal(args)
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), envMainArgs+"="+string(a)), env...)
	return cmd
}

// TestBadFlagsRefusedUpFront: every bad value is refused with one line
// naming the flag, before any work (no memory allocated, well under a
// second).
func TestBadFlagsRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"-lr NaN":                           "-lr NaN: want a finite number > 0",
		"-lr Inf":                           "-lr +Inf: want a finite number > 0",
		"-lr -1":                            "-lr -1: want a finite number > 0",
		"-min-lr NaN":                       "-min-lr NaN: want a number in [0, -lr 0.002]",
		"-weight-decay NaN":                 "-weight-decay NaN: want a finite number >= 0",
		"-weight-decay -0.1":                "-weight-decay -0.1: want a finite number >= 0",
		"-clip -1":                          "-clip -1: want a finite number > 0, or 0 for no clipping",
		"-clip Inf":                         "-clip +Inf",
		"-batch 0":                          "-batch 0: want at least 1",
		"-steps 0":                          "-steps 0: want at least 1",
		"-max-time -1s":                     "-max-time -1s: want 0 (no limit) or more",
		"-sample -5":                        "-sample -5: want 0 (no sample) or more",
		"-save-every -1":                    "-save-every -1",
		"-precision fp16 -max-skips 0":      "-max-skips 0: want at least 1",
		"-dropout 1":                        "-dropout 1: want a number in [0, 1)",
		"-dropout NaN":                      "-dropout NaN",
		"-digits 0":                         "-digits 0: want 1 to 6",
		"-memory-plot m.png -memory-step 0": "-memory-step 0: want at least 1",
		"-config huge":                      `-config "huge": want one of char, gpt2, gpt2-medium, tiny`,
		"-policy bogus":                     `-policy "bogus": want hybrid, device, managed or staging`,
		"-bench -resume x":                  "-resume continues training: not with -bench",
		"-state  -save-every 10":            "-save-every 10: needs -state",
		"-warmup -1":                        "-warmup -1: want 0 or more",
		"-eval-every -1":                    "-eval-every -1",
		"-precision fp8":                    `-precision "fp8"`,
		"-checkpoint-every 0":               "-checkpoint-every 0",
		"-config tiny extra-arguments":      "unexpected arguments",
	}
	for args, want := range cases {
		_, err := parseFlags(strings.Split(args, " "))
		require.ErrorContains(t, err, want, args)
	}
	// Files: checked by run before the device or the model exist.
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	allocs := func() (n int64) { // only grows: unlike the bytes in use, the GC's cleanups do not move it
		for _, r := range tensor.CPU().Memory().Stats().Roles {
			n += r.Allocs
		}
		return n
	}
	before := allocs()
	files := map[string]string{
		"-out /nonexistent/dir/w.safetensors":          "-out: cannot write /nonexistent/dir/w.safetensors: directory /nonexistent/dir/ does not exist",
		"-out " + sub:                                  "-out: " + sub + " is a directory",
		"-out /proc/x":                                 "-out: cannot write /proc/x: cannot create files in /proc/",
		"-loss-log /nonexistent/l.jsonl":               "-loss-log: cannot write",
		"-state /nonexistent/s.safetensors":            "-state: cannot write",
		"-data /nonexistent.txt":                       "-data: stat /nonexistent.txt: no such file or directory",
		"-data " + sub:                                 "-data: " + sub + " is a directory",
		"-resume /nonexistent.safetensors":             "-resume: stat /nonexistent.safetensors",
		"-memory-trace /nonexistent/t.json":            "-memory-trace: cannot write",
		"-memory-plot " + sub + "/no/p.png":            "-memory-plot: cannot write",
		"-out " + sub + "/w.safetensors -state " + sub: "-state: " + sub + " is a directory",
	}
	for args, want := range files {
		steps := []string{"-steps", "3"}
		if strings.HasPrefix(args, "-memory-") {
			steps = []string{"-memory-step", "3"}
		}
		o, err := parseFlags(append(append(strings.Fields(args), steps...), "-device", "cpu", "-quiet"))
		require.NoError(t, err, args)
		start := time.Now()
		err = run(o)
		require.ErrorContains(t, err, want, args)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), args)
		require.Equal(t, 2, ex.Code, "%s: a bad path is a bad flag", args)
		require.Less(t, time.Since(start), time.Second, args)
	}
	require.Equal(t, before, allocs(), "nothing was allocated")
	require.Empty(t, testfs.Names(t, sub), "the checks leave no file behind")
}

// The program's exit codes: 0 for -h, 2 for a bad flag (one line on
// stderr), 1 for a failure during the run.
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs subprocesses")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-h"}, 0, "Usage of train-gpt"},
		{[]string{"-lr", "NaN"}, 2, "train-gpt: -lr NaN: want a finite number > 0\n"},
		{[]string{"-out", dir}, 2, "is a directory"},
		{[]string{"-lr", "1e30", "-steps", "5", "-batch", "8", "-quiet", "-device", "cpu", "-out", "w.safetensors"}, 1, "step 2: loss NaN"},
	} {
		var stderr bytes.Buffer
		cmd := mainCmd(t, dir, nil, c.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.msg, c.args)
	}
	_, err := os.Stat(filepath.Join(dir, "w.safetensors"))
	require.ErrorIs(t, err, os.ErrNotExist, "a run that went wrong saves no weights")
}

// A run whose loss goes non-finite stops at that step, before the update,
// and leaves an existing -out untouched; under fp16 the scaler skips the
// steps and -max-skips of them stop the run.
func TestNonFiniteLossStops(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "w.safetensors")
	require.NoError(t, os.WriteFile(out, []byte("good weights"), 0o644))
	for _, c := range []struct{ prec, msg string }{
		{"fp32", "step 2: loss NaN, gradient norm NaN: not finite; stopped before the optimizer update"},
		{"bf16", "not finite; stopped before the optimizer update"},
		{"fp16", "step 4: the fp16 gradient scaler skipped 3 steps in a row"},
	} {
		args := []string{"-lr", "1e30", "-steps", "20", "-batch", "4", "-device", "cpu", "-quiet", "-eval-every", "0",
			"-out", out, "-precision", c.prec, "-config", "tiny",
			"-state", filepath.Join(dir, c.prec+".state.safetensors")} // each run's: the state of the steps before is saved
		if c.prec == "fp16" { // the scaler's; refused with the others
			args = append(args, "-max-skips", "3")
		}
		o, err := parseFlags(args)
		require.NoError(t, err)
		err = run(o)
		require.ErrorContains(t, err, c.msg, c.prec)
		b, rerr := os.ReadFile(out)
		require.NoError(t, rerr)
		require.Equal(t, "good weights", string(b), c.prec)
	}
}

// -h exits 0 through main as well: parseFlags returns flag.ErrHelp.
func TestHelpIsNotAnError(t *testing.T) {
	_, err := parseFlags([]string{"-h"})
	require.Error(t, err)
}

// An output path that is an input (-data, -resume, -init) or another
// output is refused before any work: -loss-log text.txt used to truncate
// the text it trained on, -out text.txt to replace it with the weights.
// The state may be the file it resumes from, and -out the weights it
// starts from.
func TestOutputsNeverOverwriteInputs(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.txt")
	body := strings.Repeat("the quick brown fox jumps over the lazy dog\n", 100)
	require.NoError(t, os.WriteFile(text, []byte(body), 0o644))
	w := filepath.Join(dir, "w.safetensors")
	require.NoError(t, os.WriteFile(w, []byte("weights"), 0o644))
	for args, want := range map[string]string{
		"-data " + text + " -loss-log " + text:                             "-loss-log " + text + ": would overwrite -data",
		"-data " + text + " -out " + text:                                  "-out " + text + ": would overwrite -data",
		"-data " + text + " -loss-plot " + text:                            "-loss-plot " + text + ": would overwrite -data",
		"-data " + text + " -state " + text:                                "-state " + text + ": would overwrite -data",
		"-out " + w + " -loss-log " + w:                                    "-loss-log " + w + ": the same file as -out",
		"-out " + w + " -state " + w:                                       "-state " + w + ": the same file as -out",
		"-out " + w + " -loss-plot " + dir + "/./w.safetensors":            "-loss-plot " + dir + "/./w.safetensors: the same file as -out",
		"-init " + w + " -loss-log " + w:                                   "-loss-log " + w + ": would overwrite -init",
		"-resume " + w + " -out " + w:                                      "-out " + w + ": would overwrite -resume",
		"-memory-trace " + dir + "/m.json -memory-plot " + dir + "/m.json": "-memory-plot " + dir + "/m.json: the same file as -memory-trace",
	} {
		common := []string{"-device", "cpu", "-quiet"}
		if !strings.HasPrefix(args, "-memory-") { // training flags, which the memory captures refuse
			common = append(common, "-out", filepath.Join(dir, "new.safetensors"), "-steps", "3")
		}
		o, err := parseFlags(append(common, strings.Fields(args)...))
		require.NoError(t, err, args)
		err = run(o)
		require.ErrorContains(t, err, want, args)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), args)
		require.Equal(t, 2, ex.Code, args)
	}
	b, err := os.ReadFile(text)
	require.NoError(t, err)
	require.Equal(t, body, string(b), "the data is untouched")
	b, err = os.ReadFile(w)
	require.NoError(t, err)
	require.Equal(t, "weights", string(b))
	require.ElementsMatch(t, []string{"text.txt", "w.safetensors"}, testfs.Names(t, dir), "nothing written")
	// Allowed: -state the file -resume reads, -out the weights -init read
	// (each replaced, atomically, only when the run has made the new one).
	for _, args := range []string{"-resume " + w + " -state " + w, "-init " + w + " -out " + w} {
		o, err := parseFlags(append([]string{"-out", filepath.Join(dir, "new.safetensors"), "-steps", "3", "-device", "cpu", "-quiet"}, strings.Fields(args)...))
		require.NoError(t, err, args)
		require.NoError(t, o.checkFiles(), args)
	}
}

// -device is checked with the flags: a name that is no device is a bad
// flag (status 2) naming -device, and so is -cpuprofile's path.
func TestDeviceAndProfileFlagsRefusedUpFront(t *testing.T) {
	for _, d := range []string{"bogus", "cuda:x", "cuda:-1", "cpu0"} {
		_, err := parseFlags([]string{"-device", d})
		require.ErrorContains(t, err, fmt.Sprintf("-device %q: want cpu, cuda, cuda:N or auto", d), d)
	}
	for _, d := range []string{"cpu", "CPU", "auto", "cuda", "gpu", "cuda:1", " cuda:0 "} {
		_, err := parseFlags([]string{"-device", d})
		require.NoError(t, err, d)
	}
	t.Setenv("STRATA_DEVICE", "tpu")
	_, err := parseFlags(nil)
	require.ErrorContains(t, err, `-device (STRATA_DEVICE="tpu"): want cpu, cuda, cuda:N or auto`)
	t.Setenv("STRATA_DEVICE", "")
	_, err = parseFlags([]string{"-device", "cpu", "-cuda-graph", "on"})
	require.ErrorContains(t, err, "-cuda-graph on: CUDA graphs need a CUDA device, not -device cpu")

	dir := t.TempDir()
	for _, mode := range [][]string{{"-out", filepath.Join(dir, "w.safetensors")}, {"-bench"}} {
		o, err := parseFlags(append(mode, "-steps", "1", "-device", "cpu", "-quiet", "-cpuprofile", filepath.Join(dir, "no", "p.pprof")))
		require.NoError(t, err)
		err = run(o)
		require.ErrorContains(t, err, "-cpuprofile: cannot write", mode)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%v", mode)
		require.Equal(t, 2, ex.Code, mode)
	}
	require.Empty(t, testfs.Names(t, dir))
}

// A flag the job would ignore is refused, not silently dropped: -bench
// and the memory captures time random tokens (-data was not even read)
// and save nothing (-loss-log used to be dropped without a word), and
// -digits is the addition task's, which -data replaces; -quiet prints
// no progress lines, whatever -progress-every says.
func TestIgnoredFlagsRefused(t *testing.T) {
	for args, want := range map[string]string{
		"-bench -data text.txt":               "-data: not with -bench, -memory-trace or -memory-plot",
		"-memory-trace m.json -data text.txt": "-data: not with -bench, -memory-trace or -memory-plot",
		"-data text.txt -digits 4":            "-digits 4: the built-in addition task's; not with -data",
		"-bench -loss-log l.jsonl":            "-loss-log: a training flag; not with -bench",
		"-bench -out w.safetensors":           "-out: a training flag; not with -bench",
		"-bench -save-every 5":                "-save-every: a training flag; not with -bench",
		"-memory-plot m.png -eval-every 5":    "-eval-every: a training flag; not with -bench, -memory-trace",
		"-memory-trace m.json -steps 5":       "-steps: not with -memory-trace or -memory-plot",
		"-sample 5":                           "-sample 5: samples text of -data",
		"-quiet -progress-every 10s":          "-progress-every 10s: not with -quiet",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, want, args)
	}
	for _, args := range []string{"-bench -data=", "-bench -out=", "-bench -steps 5 -bench-warmup 1", "-digits 4", "-data text.txt", "-sample 0", "-data text.txt -sample 5", "-quiet -progress-every 0"} {
		_, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
	}
}

// TestNonFiniteStepSavesState: a step whose loss goes non-finite stops
// the run before its update, and the message said the weights were those
// of the step before (lower -lr) while the run ended without saving them:
// every step trained was lost. The run now saves the training state after
// the last good step, the one an interrupt there saves (the failed step's
// batch drawn again by the resumed run), for a -resume with a lower -lr.
func TestNonFiniteStepSavesState(t *testing.T) {
	dir := t.TempDir()
	args := func(state string, extra ...string) []string {
		return append([]string{"-lr", "1e30", "-steps", "6", "-batch", "4", "-device", "cpu", "-quiet", "-eval-every", "0",
			"-out", filepath.Join(dir, "w.safetensors"), "-loss-plot", "off", "-state", state}, extra...)
	}
	interrupted := filepath.Join(dir, "interrupted.safetensors")
	o, err := parseFlags(args(interrupted))
	require.NoError(t, err)
	o.stopAt = 1
	require.Error(t, run(o)) // status 130, the state after step 1 saved

	rescued := filepath.Join(dir, "rescued.safetensors")
	o, err = parseFlags(args(rescued))
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "step 2: loss NaN, gradient norm NaN: not finite; stopped before the optimizer update")
	require.ErrorContains(t, err, "; saved the training state after step 1 to "+rescued+": continue the run with -resume "+rescued)
	_, serr := os.Stat(filepath.Join(dir, "w.safetensors"))
	require.ErrorIs(t, serr, os.ErrNotExist, "a run that went wrong saves no weights")
	a, err := tensor.ReadSafetensorsMetadata(interrupted)
	require.NoError(t, err)
	b, err := tensor.ReadSafetensorsMetadata(rescued)
	require.NoError(t, err)
	delete(a, keyOutputs) // the -state paths differ
	delete(b, keyOutputs)
	require.Equal(t, a, b, "the state an interrupt after step 1 saves")
}
