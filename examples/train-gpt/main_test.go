package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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
		"-checkpoint all":                            `-checkpoint "all": want none, blocks or selective`,
		"-checkpoint blocks -checkpoint-every 0":     "-checkpoint-every 0: must be at least 1",
		"-checkpoint-every 2":                        "-checkpoint-every 2: needs -checkpoint blocks or selective",
		"-checkpoint selective -checkpoint-every -1": "-checkpoint-every -1",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, msg, args)
	}
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, nn.CheckpointNone, o.ckptMode)
	for _, args := range []string{"-checkpoint blocks", "-checkpoint selective -checkpoint-every 2"} {
		o, err := parseFlags(append(strings.Fields(args), "-bench", "-steps", "1", "-bench-warmup", "0", "-batch", "2", "-device", "cpu"))
		require.NoError(t, err, args)
		require.NoError(t, run(o), args)
	}
}
