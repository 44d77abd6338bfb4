package main

import (
	"bytes"
	"errors"
	"io"
	"net"
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

// An output path that is a named pipe, a socket, a device or a dangling
// symbolic link is refused before any work, as a bad flag (status 2), and
// left as it was: -out /dev/full used to replace the device with a
// regular file. Every stand-in is made in the test's own directory.
func TestOutputsThatAreNotFilesRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	defer l.Close()
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing"), dangling))
	want := map[string]string{fifo: "is not a regular file (a named pipe)", sock: "is not a regular file (a socket)", dangling: "which does not exist"}
	dev := filepath.Join(dir, "chardev")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o644, 1<<8|3); err == nil { // never opened
		want[dev] = "is not a regular file (a device)"
	} else {
		t.Logf("no device stand-in: %v", err)
	}
	for path, msg := range want {
		before, err := os.Lstat(path)
		require.NoError(t, err)
		for _, flag := range []string{"-out", "-loss-log", "-state", "-loss-plot", "-cpuprofile"} {
			args := []string{"-steps", "3", "-device", "cpu", "-quiet", "-out", filepath.Join(dir, "w.safetensors"), flag, path}
			o, err := parseFlags(args)
			require.NoError(t, err, args)
			start := time.Now()
			err = run(o)
			require.ErrorContains(t, err, flag+": "+path+" is ", args)
			require.ErrorContains(t, err, msg, args)
			var ex *cli.ExitError
			require.True(t, errors.As(err, &ex), args)
			require.Equal(t, 2, ex.Code, args)
			require.Less(t, time.Since(start), time.Second, args)
		}
		after, err := os.Lstat(path)
		require.NoError(t, err)
		require.Equal(t, before.Mode(), after.Mode(), path)
	}
}

// A -batch whose token ids cannot fit the host memory, or whose tokens a
// step overflow an int, is refused with the flags (status 2), not after
// a fatal out-of-memory error or a makeslice panic.
func TestHugeBatchRefused(t *testing.T) {
	t.Setenv("STRATA_HOST_MEMORY", "1GiB")
	for args, want := range map[string]string{
		"-batch 9223372036854775807":                      "-batch 9223372036854775807: 12 tokens a row make more tokens a step than an int holds",
		"-batch 1000000000000":                            "-batch 1000000000000: 12000000000000 tokens a step need 87.31 TiB for their ids and targets alone, more than the host memory budget of 1.00 GiB",
		"-bench -batch 100000000":                         "-batch 100000000: 6400000000 tokens a step need",
		"-data x.txt -config gpt2 -batch 1000000":         "-batch 1000000: 1024000000 tokens a step need",
		"-memory-trace m.json -batch 9223372036854775807": "more tokens a step than an int holds",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, want, args)
		require.NotContains(t, err.Error(), "\n", args)
	}
	for _, args := range []string{"-batch 1000", "-bench -batch 64", "-data x.txt -config gpt2 -batch 64"} {
		_, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
	}
	t.Setenv("STRATA_HOST_MEMORY", "off")
	_, err := parseFlags([]string{"-batch", "9223372036854775807"})
	require.ErrorContains(t, err, "more tokens a step than an int holds", "no budget: the overflow is still refused")
}

// The same through main: one line on stderr, status 2.
func TestHugeBatchExitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	var stderr bytes.Buffer
	cmd := mainCmd(t, t.TempDir(), nil, "-steps", "3", "-batch", "9223372036854775807", "-device", "cpu")
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v: %s", err, stderr.String())
	require.Equal(t, 2, ee.ExitCode(), stderr.String())
	require.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())
}

// More flags the job would ignore are refused, naming the flag; only
// flags set on the command line count.
func TestMoreIgnoredFlagsRefused(t *testing.T) {
	for args, want := range map[string]string{
		"-placement-plan":                                              "-placement-plan: prints the placement scheduler's plans, which run only under -device-budget",
		"-placement-plan -device-budget off":                           "-placement-plan: prints the placement scheduler's plans, which run only under -device-budget",
		"-bench-warmup 2":                                              "-bench-warmup 2: the warm-up steps of -bench; only with -bench",
		"-memory-step 2":                                               "-memory-step 2: the step -memory-trace and -memory-plot record; only with one of them",
		"-bench -tokenizer gpt2":                                       "-tokenizer gpt2: tokenizes -data; not with -bench, -memory-trace or -memory-plot",
		"-memory-trace m.json -tokenizer byte":                         "-tokenizer byte: tokenizes -data; not with",
		"-bench -memory-trace m.json":                                  "-bench: not with -memory-trace or -memory-plot, which record -memory-step steps and time none",
		"-memory-plot m.png -bench":                                    "-bench: not with -memory-trace or -memory-plot",
		"-max-skips 5":                                                 "-max-skips 5: counts the steps the fp16 gradient scaler skips; only with -precision fp16, not fp32",
		"-max-skips 5 -precision bf16":                                 "-max-skips 5: counts the steps the fp16 gradient scaler skips; only with -precision fp16, not bf16",
		"-checkpoint auto -device-budget off":                          "-checkpoint auto: needs -device-budget",
		"-device-budget 0":                                             `-device-budget 0: want a size such as 4GiB, a share such as 50%, or off for no budget`,
		"-checkpoint blocks -checkpoint-every 3":                       "-checkpoint-every 3: more than the 2 blocks of -config tiny (no block would be checkpointed)",
		"-checkpoint selective -checkpoint-keep-wide 3":                "-checkpoint-keep-wide 3: more than the 2 blocks of -config tiny (want at most 2, or all)",
		"-config char -checkpoint selective -checkpoint-keep-wide 7":   "-checkpoint-keep-wide 7: more than the 6 blocks of -config char",
		"-checkpoint auto -device-budget 1GiB -checkpoint-keep-wide 9": "-checkpoint-keep-wide 9: more than the 2 blocks",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, want, args)
	}
	for _, args := range []string{
		"-placement-plan -device-budget 1GiB", "-placement-plan=false", "-bench -bench-warmup 2", "-memory-plot m.png -memory-step 2",
		"-memory-plot m.png -bench=false", "-data x.txt -tokenizer gpt2 -config gpt2", "-max-skips 5 -precision fp16", "-device-budget off", "-device-budget none",
		"-checkpoint auto -device-budget 50%", "-checkpoint blocks -checkpoint-every 2", "-checkpoint selective -checkpoint-keep-wide 2",
		"-checkpoint selective -checkpoint-keep-wide all", "-config char -checkpoint selective -checkpoint-keep-wide 6",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
	}
}

// A resumed run restores its random generators, so -seed has no effect on
// it: the note says the new seed is ignored (it used to say the resumed
// run followed it), and the run keeps the saved seed (for the end's
// sample and the states it saves).
func TestResumeIgnoresSeed(t *testing.T) {
	saved := runIdentity{Config: "tiny", Tokenizer: "byte", Digits: 3, Seed: 1, Steps: 6}
	now := saved
	now.Seed, now.Steps = 2, 8
	var w bytes.Buffer
	require.NoError(t, compareRuns(saved, now, &w))
	require.Contains(t, w.String(), "train-gpt: note: -seed 2 is ignored: a resumed run continues the saved run's random generators (-seed 1)\n")
	require.NotContains(t, w.String(), "seed is 2 now")
	require.Contains(t, w.String(), "steps is 8 now, 6 in the saved run; the resumed run follows the new value")

	dir := t.TempDir()
	state := filepath.Join(dir, "s.safetensors")
	common := []string{"-device", "cpu", "-quiet", "-steps", "4", "-batch", "4", "-eval-every", "0", "-out", filepath.Join(dir, "w.safetensors"), "-state", state}
	o, err := parseFlags(common)
	require.NoError(t, err)
	o.stopAt = 2
	var ex *cli.ExitError
	require.True(t, errors.As(run(o), &ex))
	o, err = parseFlags(append(common, "-resume", state, "-seed", "2"))
	require.NoError(t, err)
	require.NoError(t, run(o))
	require.Equal(t, uint64(1), o.seed, "the saved run's seed")
}

// -sample 0 asks for no sample: no sample header is printed either.
func TestSampleZeroPrintsNothing(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("the quick brown fox\n", 400)), 0o644))
	var err error
	b := captureStderr(t, func() {
		var o *options
		if o, err = parseFlags([]string{"-data", text, "-steps", "1", "-batch", "2", "-sample", "0", "-device", "cpu", "-quiet", "-out", "", "-loss-plot", "off"}); err == nil {
			err = run(o)
		}
	})
	require.NoError(t, err)
	require.False(t, strings.Contains(b, "sample ("), "a sample header was printed")
	require.True(t, strings.Contains(b, "held-out loss"), "the run reached its end")
}

// failingWriter fails every write after the first ok ones, and its
// Close when closeErr is set: a full disk, without touching a device.
type failingWriter struct {
	w        io.WriteCloser
	ok       int
	closeErr error
}

var errDiskFull = errors.New("no space left on device (test)")

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.ok <= 0 {
		return 0, errDiskFull
	}
	f.ok--
	return f.w.Write(p)
}

func (f *failingWriter) Close() error {
	err := f.w.Close()
	if f.closeErr != nil {
		return f.closeErr
	}
	return err
}

// A write or close of a result that fails (a full disk) fails the run
// (status 1) naming the file: -loss-log's lines and its close,
// -cpuprofile's profile, -bench's JSON line on stdout. They used to be
// dropped with status 0.
func TestWriteErrorsFailTheRun(t *testing.T) {
	t.Cleanup(func() { wrapOutput = func(w io.WriteCloser) io.WriteCloser { return w }; stdout = os.Stdout })
	dir := t.TempDir()
	lossLog := filepath.Join(dir, "l.jsonl")
	train := []string{"-steps", "4", "-batch", "4", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", "", "-loss-plot", "off", "-loss-log", lossLog,
		"-state", filepath.Join(dir, "s.safetensors")} // the loss log's close failing at the end saves the state (in dir, not the package's)
	for _, c := range []struct {
		what string
		fw   failingWriter
		args []string
		want string
	}{
		{"a loss line", failingWriter{ok: 2}, train, "-loss-log " + lossLog + ": no space left on device (test)"},
		{"the loss log's close", failingWriter{ok: 100, closeErr: errDiskFull}, train, "-loss-log " + lossLog + ": no space left on device (test)"},
		{"the profile", failingWriter{}, []string{"-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu", "-cpuprofile", filepath.Join(dir, "p.pprof")},
			"-cpuprofile " + filepath.Join(dir, "p.pprof") + ": no space left on device (test)"},
	} {
		os.Remove(filepath.Join(dir, "s.safetensors")) // the case before saved its state (a new run refuses to replace it)
		wrapOutput = func(w io.WriteCloser) io.WriteCloser { fw := c.fw; fw.w = w; return &fw }
		o, err := parseFlags(c.args)
		require.NoError(t, err, c.what)
		err = run(o)
		require.ErrorContains(t, err, c.want, c.what)
		var ex *cli.ExitError
		require.False(t, errors.As(err, &ex), "%s: a failure of the run, status 1", c.what)
	}
	wrapOutput = func(w io.WriteCloser) io.WriteCloser { return w }
	stdout = &failingWriter{}
	o, err := parseFlags([]string{"-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu"})
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "writing the results to stdout: no space left on device (test)")
}

// A bad or unknown flag is one line on stderr naming it, with a hint, and
// status 2 (it used to be the error, the whole usage, then the error
// again); -h prints the usage, status 0.
func TestBadFlagIsOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs subprocesses")
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-nosuchflag"}, 2, "train-gpt: flag provided but not defined: -nosuchflag (train-gpt -h lists the flags)\n"},
		{[]string{"-lr", "abc"}, 2, `train-gpt: invalid value "abc" for flag -lr: parse error (train-gpt -h lists the flags)` + "\n"},
		{[]string{"-steps"}, 2, "train-gpt: flag needs an argument: -steps (train-gpt -h lists the flags)\n"},
		{[]string{"-steps", "3", "extra"}, 2, "train-gpt: unexpected arguments [\"extra\"] (train-gpt -h lists the flags)\n"},
		// Quoted, as the other programs do: an empty argument and one with
		// a space printed as [] and [a b c] with %v.
		{[]string{"-steps", "3", ""}, 2, "train-gpt: unexpected arguments [\"\"] (train-gpt -h lists the flags)\n"},
		{[]string{"-steps", "3", "a b", "c"}, 2, "train-gpt: unexpected arguments [\"a b\" \"c\"] (train-gpt -h lists the flags)\n"},
	} {
		var stderr bytes.Buffer
		cmd := mainCmd(t, t.TempDir(), nil, c.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: %v", c.args, err)
		require.Equal(t, c.code, ee.ExitCode(), c.args)
		require.Equal(t, c.msg, stderr.String(), c.args)
	}
	var stderr bytes.Buffer
	cmd := mainCmd(t, t.TempDir(), nil, "-h")
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run())
	require.Contains(t, stderr.String(), "Usage of train-gpt:")
	require.Greater(t, strings.Count(stderr.String(), "\n"), 50, "the whole usage")
}

// Decided before any work, right after opening the device: a device that
// is not there and a -cuda-graph on the run cannot use are bad flags
// (status 2), as they are in generate (-device cuda without a GPU used to
// be 1; -cuda-graph on was 2 with -device cpu but 1 under -device auto
// falling back to the CPU).
func TestDeviceConflictsAreBadFlags(t *testing.T) {
	t.Setenv("STRATA_DEVICE", "")
	dir := t.TempDir()
	cases := map[string]string{
		"-cuda-graph on -dropout 0.1": "-cuda-graph on: ", // the CPU's, or dropout's on a GPU
	}
	if _, err := tensor.CUDA(0); err != nil {
		cases["-device cuda"] = "-device cuda: no usable GPU: "
		cases["-device auto -cuda-graph on"] = "-cuda-graph on: CUDA graphs need a CUDA device"
	}
	for args, want := range cases {
		o, err := parseFlags(append(strings.Fields(args), "-steps", "3", "-quiet", "-out", filepath.Join(dir, "w.safetensors")))
		require.NoError(t, err, args)
		start := time.Now()
		err = run(o)
		require.ErrorContains(t, err, want, args)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%s: %v", args, err)
		require.Equal(t, 2, ex.Code, args)
		require.Less(t, time.Since(start), time.Second, args)
	}
	require.Empty(t, testfs.Names(t, dir))
}
