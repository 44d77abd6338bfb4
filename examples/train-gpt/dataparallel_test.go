package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/nccl"
)

// -gpus and -zero1 refuse what they cannot do, naming the flag, before
// any work.
func TestDataParallelFlags(t *testing.T) {
	t.Setenv(EnvDistNCCL, "")
	t.Setenv("STRATA_DEVICE", "")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-gpus", "0"}, "-gpus 0: want at least 1"},
		{[]string{"-gpus", "-2"}, "-gpus -2: want at least 1"},
		{[]string{"-zero1"}, "-zero1: needs -gpus 2 or more"},
		{[]string{"-no-overlap-reduce"}, "-no-overlap-reduce: needs -gpus 2 or more"},
		{[]string{"-gpus", "2", "-device", "cpu"}, "-gpus 2: -device cpu"},
		{[]string{"-gpus", "2", "-device", "cuda:1"}, "rank r trains on cuda:r"},
		{[]string{"-gpus", "2", "-bench"}, "-gpus 2: not with -bench"},
		{[]string{"-gpus", "2", "-memory-trace", "m.json"}, "-gpus 2: not with -bench, -memory-trace"},
		{[]string{"-gpus", "2", "-device-budget", "4GiB"}, "-gpus 2: not with -device-budget"},
		{[]string{"-gpus", "2", "-resume", "s.safetensors"}, "-resume: not with -gpus 2"},
		{[]string{"-gpus", "2", "-zero1", "-overlap-optimizer"}, "-zero1: not with -overlap-optimizer"},
		{[]string{"-gpus", "2", "-zero1", "-save-every", "5"}, "-zero1: the AdamW moments are sharded"},
		{[]string{"-gpus", "2", "-zero1", "-state", "s.safetensors"}, "-zero1: the AdamW moments are sharded"},
	} {
		_, err := parseFlags(c.args)
		require.Error(t, err, "%v", c.args)
		assert.Contains(t, err.Error(), c.msg, "%v", c.args)
	}
	t.Setenv("STRATA_DEVICE", "cpu")
	_, err := parseFlags([]string{"-gpus", "2"})
	require.ErrorContains(t, err, "-device cpu (or STRATA_DEVICE=cpu)")
	t.Setenv("STRATA_DEVICE", "")

	o, err := parseFlags(nil)
	require.NoError(t, err)
	assert.Equal(t, 1, o.gpus)
	assert.False(t, o.dataParallel(), "-gpus 1 keeps the ordinary path")
	o, err = parseFlags([]string{"-gpus", "4", "-zero1"})
	require.NoError(t, err)
	assert.True(t, o.dataParallel())
	assert.Empty(t, o.state, "-zero1 saves no training state")
	t.Setenv(EnvDistNCCL, "1")
	o, err = parseFlags([]string{"-batch", "3"})
	require.NoError(t, err)
	assert.True(t, o.dataParallel(), EnvDistNCCL+"=1 takes the data-parallel path with one GPU")
	_, err = parseFlags([]string{"-device", "cpu"})
	require.ErrorContains(t, err, EnvDistNCCL+"=1: -device cpu")
}

// Found by run before any work: a batch that does not divide, and, on a
// machine without enough GPUs or NCCL, what is missing.
func TestDataParallelRunErrors(t *testing.T) {
	t.Setenv(EnvDistNCCL, "")
	t.Setenv("STRATA_DEVICE", "")
	o, err := parseFlags([]string{"-gpus", "2", "-batch", "7", "-steps", "1", "-out", ""})
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "-batch 7: not divisible by -gpus 2")

	n := 0
	if cuda.Init() == nil {
		n, _ = cuda.DeviceCount()
	}
	o, err = parseFlags([]string{"-gpus", "64", "-batch", "64", "-steps", "1", "-out", ""})
	require.NoError(t, err)
	err = run(o)
	require.Error(t, err)
	switch {
	case cuda.Init() != nil:
		assert.Contains(t, err.Error(), "-gpus 64: data-parallel training needs CUDA GPUs, and the CUDA driver does not load")
		assert.Contains(t, err.Error(), "libcuda.so.1", "names what was tried")
	default:
		assert.Contains(t, err.Error(), "-gpus 64: the CUDA driver sees")
		t.Logf("%d GPUs: %v", n, err)
	}
}

// readLosses reads a -loss-log file.
func readLosses(t *testing.T, path string) []float64 {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Loss float64 `json:"loss"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		out = append(out, r.Loss)
	}
	require.NoError(t, sc.Err())
	return out
}

// dpRun trains the tiny model on the addition task for a few steps with
// args and returns its losses and whether it saved the weights.
func dpRun(t *testing.T, local bool, args ...string) []float64 {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "loss.jsonl")
	base := []string{"-quiet", "-steps", "6", "-batch", "16", "-warmup", "2", "-eval-every", "0", "-sample", "0",
		"-out", filepath.Join(dir, "w.safetensors"), "-loss-plot", "off", "-loss-log", log, "-progress-every", "0"}
	o, err := parseFlags(append(base, args...))
	require.NoError(t, err)
	o.localRanks = local
	require.NoError(t, run(o), "%v", args)
	_, err = os.Stat(filepath.Join(dir, "w.safetensors"))
	require.NoError(t, err, "rank 0 saved the weights")
	return readLosses(t, log)
}

// compareLosses checks b against the reference a within rel.
func compareLosses(t *testing.T, a, b []float64, rel float64, what string) {
	t.Helper()
	require.Len(t, b, len(a), what)
	worst := 0.0
	for i := range a {
		d := math.Abs(a[i]-b[i]) / math.Abs(a[i])
		worst = max(worst, d)
		assert.LessOrEqual(t, d, rel, "%s: step %d: loss %.9g, want %.9g", what, i+1, b[i], a[i])
	}
	t.Logf("%s: losses %.6f..%.6f, worst relative difference %.2g", what, b[0], b[len(b)-1], worst)
}

// The data-parallel path of train-gpt on the CPU, its ranks joined by
// dist.NewLocalGroup in place of NCCL: 2 and 4 ranks, each with its
// share of the global batch of 16, train as one process on the whole
// batch does (the dist package's tolerance: the ranks' sums are added in
// another order), with AdamW and with ZeRO-1; and the all-reduce after
// backward (-no-overlap-reduce) gives the overlapped path's losses bit
// for bit.
func TestDataParallelLocalMatchesOne(t *testing.T) {
	t.Setenv(EnvDistNCCL, "")
	if testing.Short() {
		t.Skip("trains 5 short runs")
	}
	ref := dpRun(t, false, "-device", "cpu")
	var two []float64
	for _, args := range [][]string{{"-gpus", "2"}, {"-gpus", "4"}, {"-gpus", "2", "-zero1"}} {
		got := dpRun(t, true, append([]string{"-device", "auto"}, args...)...)
		compareLosses(t, ref, got, 1e-5, fmt.Sprint("local ranks ", args))
		if two == nil {
			two = got
		}
	}
	compareLosses(t, two, dpRun(t, true, "-device", "auto", "-gpus", "2", "-no-overlap-reduce"), 0, "local ranks -gpus 2 -no-overlap-reduce against the overlap")
}

// gpuOrSkip skips without a GPU or NCCL (failing instead when
// STRATA_REQUIRE_GPU is set), and when fewer than n GPUs are visible.
func gpuOrSkip(t *testing.T, n int) {
	t.Helper()
	miss := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if err := cuda.Init(); err != nil {
		miss("no CUDA driver: %v", err)
	}
	count, err := cuda.DeviceCount()
	require.NoError(t, err)
	if count == 0 {
		miss("no GPU")
	}
	if err := nccl.Init(); err != nil {
		miss("no NCCL: %v", err)
	}
	if count < n {
		t.Skipf("needs %d GPUs, this machine has %d", n, count)
	}
}

// On the GPU: -gpus 1 through the NCCL path (EnvDistNCCL) gives the
// ordinary path's losses (a one-rank all-reduce and a division by 1
// change no bit), with AdamW and with ZeRO-1, and -no-overlap-reduce the
// overlapped path's bit for bit; and, where there are 2 GPUs, -gpus 2
// gives one GPU's losses on the same global batch within float
// tolerance, with and without the overlap alike.
func TestGPUDataParallel(t *testing.T) {
	gpuOrSkip(t, 1)
	t.Setenv(EnvDistNCCL, "")
	ref := dpRun(t, false, "-device", "cuda")
	t.Setenv(EnvDistNCCL, "1")
	overlapped := dpRun(t, false, "-device", "cuda")
	compareLosses(t, ref, overlapped, 1e-6, "NCCL, 1 GPU")
	compareLosses(t, overlapped, dpRun(t, false, "-device", "cuda", "-no-overlap-reduce"), 0, "NCCL, 1 GPU, -no-overlap-reduce against the overlap")
	t.Setenv(EnvDistNCCL, "")
	t.Run("2 GPUs", func(t *testing.T) {
		gpuOrSkip(t, 2)
		two := dpRun(t, false, "-gpus", "2")
		compareLosses(t, ref, two, 1e-5, "NCCL, 2 GPUs")
		compareLosses(t, two, dpRun(t, false, "-gpus", "2", "-no-overlap-reduce"), 0, "NCCL, 2 GPUs, -no-overlap-reduce against the overlap")
		compareLosses(t, ref, dpRun(t, false, "-gpus", "2", "-zero1"), 1e-5, "NCCL, 2 GPUs, ZeRO-1")
	})
}
