package nn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// A weights or training state file followed by a 200 GB region (a sparse
// tail, which costs no disk) is refused from its header and size without
// reading the tail: LoadWeights read the file whole and the allocation
// killed the process ("fatal error: runtime: out of memory"), and
// LoadTrainState through ReadSafetensors. A small tail (which gave
// "metadata incomplete buffer") and a file cut short are refused naming
// both sizes; the parameters are left as they were.
func TestLoadWeightsRefusesSizeOtherThanHeader(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 1, Width: 8},
		nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	opt := nn.NewAdamW(g.Parameters(), 1e-2, 0.1)
	defer func() { opt.Release(); nn.Release(g.Parameters()) }()
	ids := []int32{1, 2, 3}
	before := gptLogits(t, g, ids)
	dir := t.TempDir()
	weights := filepath.Join(dir, "w.safetensors")
	require.NoError(t, g.SaveWeights(context.Background(), weights, nil, nn.LayoutNanoGPT))
	state := filepath.Join(dir, "s.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), state, g.Parameters(), opt, nil))
	load := map[string]func(path string) error{
		weights: func(p string) error { _, err := nn.LoadWeights(p, g.Parameters()); return err },
		state:   func(p string) error { _, err := nn.LoadTrainState(p, g.Parameters(), opt); return err },
	}
	for src, load := range load {
		fi, err := os.Stat(src)
		require.NoError(t, err)
		n := fi.Size()
		for _, c := range []struct {
			size int64
			want string
		}{
			{n + 200<<30, fmt.Sprintf("%d bytes past the tensors' data", 200<<30)},
			{n + 16, "16 bytes past the tensors' data"},
			{n - 4, "4 bytes short"},
		} {
			p := filepath.Join(dir, "bad.safetensors")
			b, err := os.ReadFile(src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, b, 0o644))
			require.NoError(t, os.Truncate(p, c.size))
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			err = load(p)
			runtime.ReadMemStats(&m1)
			require.ErrorIs(t, err, tensor.ErrArgument, src)
			require.ErrorContains(t, err, fmt.Sprintf("safetensors %s: its header describes a file of %d bytes, it has %d on disk: %s", p, n, c.size, c.want))
			require.Less(t, m1.TotalAlloc-m0.TotalAlloc, uint64(1<<20), "bytes allocated to refuse %d bytes", c.size)
		}
		require.Equal(t, before, gptLogits(t, g, ids))
		require.NoError(t, load(src))
	}
}
