package main

import (
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
	} {
		_, err := parseFlags(args)
		require.Error(t, err, "%v", args)
	}
	o, err := parseFlags(nil)
	require.NoError(t, err)
	require.Equal(t, 4000, o.steps)
	o, err = parseFlags([]string{"-bench"})
	require.NoError(t, err)
	require.Equal(t, 10, o.steps)
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
	xs, ys := make([]int32, 2*64), make([]int32, 2*64)
	a.batch(rand.New(rand.NewPCG(1, 1)), xs, ys, 2, 64)
	trained := 0
	for i := range xs {
		if ys[i] >= 0 {
			trained++
			require.True(t, strings.ContainsRune("0123456789\n", rune(ys[i])), "targets are answer digits or newline")
		}
	}
	require.Positive(t, trained)
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
