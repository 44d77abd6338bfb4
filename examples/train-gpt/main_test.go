package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

func TestFlagsRejectBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-steps", "-1"}, {"-lr", "0"}, {"-batch", "-2"}, {"extra"}, {"-nosuchflag"},
		{"-min-lr", "-1e-4"}, {"-lr", "1e-3", "-min-lr", "2e-3"},
	} {
		_, err := parseFlags(args)
		require.Error(t, err, "%v", args)
	}
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 6000, o.steps, "the addition task's default")
	require.Equal(t, 2e-3, o.lr, "the addition task's default")
	require.InDelta(t, 2e-4, o.minLR, 1e-15)
	o, err = parseFlags([]string{"-bench"})
	require.NoError(t, err)
	require.Equal(t, 10, o.steps)
	require.Equal(t, 1e-3, o.lr)
	o, err = parseFlags([]string{"-data", "x.txt"})
	require.NoError(t, err)
	require.Equal(t, 1e-3, o.lr)
	require.Equal(t, 4000, o.steps)
	o, err = parseFlags([]string{"-lr", "5e-4"})
	require.NoError(t, err)
	require.Equal(t, 5e-4, o.lr)
	o, err = parseFlags([]string{"-min-lr", "0"})
	require.NoError(t, err)
	require.Equal(t, 0.0, o.minLR, "an explicit -min-lr 0 is kept")
	for _, o := range []*options{{config: "huge", policy: "hybrid"}, {config: "tiny", policy: "bogus", device: "cpu"}, {config: "tiny", policy: "hybrid", device: "tpu"}} {
		o.lr, o.steps = 1e-3, 1
		require.Error(t, run(o))
	}
}

func TestAdditionTask(t *testing.T) {
	a, err := newAdditionTask(3)
	require.NoError(t, err)
	p, ans := a.problem(739, 931)
	require.Equal(t, "739+931=", p)
	require.Equal(t, "0761\n", ans, "1670 reversed and padded to 4 digits")
	_, err = newAdditionTask(0)
	require.Error(t, err)
	T, err := a.seqLen(64)
	require.NoError(t, err)
	require.Equal(t, 12, T, "8 prompt bytes, 4 answer digits; the newline is only a target")
	_, err = a.seqLen(11)
	require.ErrorContains(t, err, "longer than the model's context")
	xs, ys := make([]int32, 3*T), make([]int32, 3*T)
	a.batch(rand.New(rand.NewPCG(1, 1)), xs, ys, 3, T)
	for b := range 3 {
		x, y := xs[b*T:(b+1)*T], ys[b*T:(b+1)*T]
		var in, out strings.Builder
		for i := range T {
			in.WriteByte(byte(x[i]))
			if i < 7 {
				require.Equal(t, int32(-100), y[i], "row %d: prompt targets are ignored", b)
			} else {
				out.WriteByte(byte(y[i]))
			}
		}
		// Each row is one whole problem from position 0, its answer right.
		var p, q int
		_, err := fmt.Sscanf(in.String()[:8], "%d+%d=", &p, &q)
		require.NoError(t, err, "row %d: %q", b, in.String())
		wantP, wantA := a.problem(p, q)
		require.Equal(t, wantP+wantA[:4], in.String())
		require.Equal(t, wantA, out.String())
		require.False(t, heldOut(p, q), "held-out problems are never trained on")
	}
	require.Panics(t, func() { a.batch(rand.New(rand.NewPCG(1, 1)), xs, ys, 1, 64) }, "rows must be one problem long")
	n := 0
	for x := range 100 {
		for y := range 100 {
			if heldOut(x, y) {
				n++
			}
		}
	}
	require.InDelta(t, 1000, n, 150, "about one problem in ten is held out")
}

// TestTrainSmoke trains a few steps on the CPU, saves the weights and
// loads them back into a fresh model.
func TestTrainSmoke(t *testing.T) {
	out := filepath.Join(t.TempDir(), "w.safetensors")
	o, err := parseFlags([]string{"-steps", "6", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", out, "-loss-log", filepath.Join(t.TempDir(), "l.jsonl")})
	require.NoError(t, err)
	require.NoError(t, run(o))
	cfg, _ := nn.LookupGPTConfig("tiny")
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(9, 9))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	_, err = nn.LoadWeights(out, g.Parameters())
	require.NoError(t, err)
	_, err = os.Stat(out)
	require.NoError(t, err)
}

// A text file of the least accepted length trains and evaluates (its
// held-out part holds more than one window); one byte less is refused.
func TestShortestTextFile(t *testing.T) {
	const T = 64 // the tiny config's context
	path := filepath.Join(t.TempDir(), "short.txt")
	text := make([]byte, 10*(T+2))
	for i := range text {
		text[i] = 'a' + byte(i%26)
	}
	require.NoError(t, os.WriteFile(path, text, 0o644))
	o, err := parseFlags([]string{"-data", path, "-steps", "2", "-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", "", "-sample", "4"})
	require.NoError(t, err)
	require.NoError(t, run(o))
	require.NoError(t, os.WriteFile(path, text[:len(text)-1], 0o644))
	require.ErrorContains(t, run(o), "too short")
}

// -checkpoint and -checkpoint-every: bad values are refused with the
// flag's name; every mode trains (a one-step benchmark, its JSON line
// naming the mode).
func TestCheckpointFlags(t *testing.T) {
	for args, msg := range map[string]string{
		"-checkpoint all":                                                    `-checkpoint "all": want none, blocks, selective or auto`,
		"-checkpoint blocks -checkpoint-every 0":                             "-checkpoint-every 0: must be at least 1",
		"-checkpoint-every 2":                                                "-checkpoint-every 2: needs -checkpoint blocks or selective",
		"-checkpoint selective -checkpoint-every -1":                         "-checkpoint-every -1",
		"-checkpoint-offload":                                                "-checkpoint-offload: needs -checkpoint blocks or selective",
		"-checkpoint auto -device-budget 1GiB -checkpoint-offload":           "-checkpoint-offload: not with -checkpoint auto",
		"-checkpoint selective -checkpoint-offload-keep 3":                   "-checkpoint-offload-keep 3: needs -checkpoint-offload",
		"-checkpoint blocks -checkpoint-offload -checkpoint-offload-keep -1": `-checkpoint-offload-keep "-1": want auto or a count`,
		"-checkpoint blocks -checkpoint-keep-wide 2":                         "-checkpoint-keep-wide 2: needs -checkpoint selective or auto",
		"-checkpoint selective -checkpoint-offload -checkpoint-keep-wide 2":  "-checkpoint-keep-wide 2: not with -checkpoint-offload",
		"-checkpoint selective -checkpoint-keep-wide many":                   `-checkpoint-keep-wide "many": want auto, all or a count`,
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, msg, args)
	}
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, nn.CheckpointNone, o.ckptMode)
	for args, want := range map[string]int{"-config char -checkpoint selective -checkpoint-keep-wide 3": 3, "-checkpoint selective -checkpoint-keep-wide all": -1, "-checkpoint selective": 0} {
		o, err := parseFlags(strings.Fields(args))
		require.NoError(t, err, args)
		require.Equal(t, want, o.wideN, args)
		require.False(t, o.wideAuto, "auto only under a budget")
	}
	o, err = parseFlags(strings.Fields("-checkpoint selective -device-budget 1GiB"))
	require.NoError(t, err)
	require.True(t, o.wideAuto, "auto under a budget")
	require.NotNil(t, o.placementConfig(nil).WideRegions, "the placement chooses the wide products kept")
	for _, args := range []string{"-checkpoint blocks", "-checkpoint selective -checkpoint-every 2", "-checkpoint selective -checkpoint-offload", "-checkpoint blocks -checkpoint-offload", "-checkpoint blocks -checkpoint-offload -checkpoint-offload-keep 0", "-checkpoint selective -checkpoint-keep-wide 1", "-checkpoint selective -checkpoint-keep-wide all"} {
		o, err := parseFlags(append(strings.Fields(args), "-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu"))
		require.NoError(t, err, args)
		require.NoError(t, run(o), args)
	}
}

func TestPrecisionFlag(t *testing.T) {
	for flag, want := range map[string]amp.State{
		"fp32": {}, "tf32": {TF32: true},
		"fp16": {Enabled: true, DType: tensor.Float16}, "bf16": {Enabled: true, DType: tensor.BFloat16},
	} {
		o, err := parseFlags([]string{"-precision", flag})
		require.NoError(t, err)
		require.Equal(t, want, o.prec, flag)
	}
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, amp.State{}, o.prec, "fp32 by default")
	_, err = parseFlags([]string{"-precision", "fp8"})
	require.ErrorContains(t, err, `-precision "fp8"`)
}

// TestTrainStepInEveryPrecision: one step of the tiny shape on the CPU in
// each precision gives a finite loss, the fp16 scaler scales (and skips
// nothing at these values), and the step's memory is returned.
func TestTrainStepInEveryPrecision(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 32, Context: 8, Layers: 1, Heads: 2, Width: 16}
	for _, p := range []string{"fp32", "tf32", "bf16", "fp16"} {
		o, err := parseFlags([]string{"-precision", p, "-batch", "2", "-steps", "2"})
		require.NoError(t, err)
		tr, err := newTrainer(o, cfg, tensor.CPU(), cfg.Context)
		require.NoError(t, err)
		var first int64
		for it := range 2 {
			for i := range tr.xs {
				tr.xs[i], tr.ys[i] = int32(i%32), int32((i+1)%32)
			}
			loss, err := tr.step(it)
			require.NoError(t, err, p)
			require.False(t, math.IsNaN(loss) || math.IsInf(loss, 0), p)
			if it == 0 {
				first = tr.c.BytesInUse()
			}
		}
		require.Equal(t, first, tr.c.BytesInUse(), p)
		require.Zero(t, tr.scaler.Skipped(), p)
		require.Equal(t, p == "fp16", tr.scaler.Enabled(), p)
		tr.opt.Release()
		nn.Release(tr.params)
	}
}

// TestRunReturnsEveryByte: a run with evaluations and samples on text and
// with the addition task gives back all the memory it took. (The held-out
// loss once ran outside any scope of the trainer's context, with the
// graph recorded: every evaluation kept its forward pass, 526 MiB a time
// for the char shape at batch 4.)
func TestRunReturnsEveryByte(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	text := make([]byte, 4000)
	for i := range text {
		text[i] = 'a' + byte(i*7%26)
	}
	require.NoError(t, os.WriteFile(path, text, 0o644))
	for _, args := range [][]string{
		{"-data", path, "-steps", "4", "-batch", "2", "-eval-every", "2", "-sample", "8"},
		{"-steps", "4", "-batch", "8", "-eval-every", "2", "-head", "fused"},
	} {
		mem := tensor.CPU().Memory()
		before := mem.InUse()
		o, err := parseFlags(append(args, "-device", "cpu", "-quiet", "-out", ""))
		require.NoError(t, err)
		require.NoError(t, run(o))
		st := mem.Stats()
		assert.Zero(t, st.Roles[memory.RoleOther].Requested.Current, "%v: no tensor outside a scope", args)
		// Not equal: tensors other tests dropped may be collected (and
		// their memory returned by the leak safety net) during the run.
		assert.LessOrEqual(t, mem.InUse(), before, "%v: every byte returned", args)
	}
}

// -cpuprofile writes a profile pprof reads; a path that cannot be created
// is refused naming the flag.
func TestCPUProfileFlag(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cpu.pprof")
	o, err := parseFlags([]string{"-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu", "-cpuprofile", p})
	require.NoError(t, err)
	require.NoError(t, run(o))
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Positive(t, st.Size())
	o, err = parseFlags([]string{"-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu", "-cpuprofile", filepath.Join(dir, "no", "such", "dir", "p")})
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "-cpuprofile")
}
