package nn_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadWeightsPeakIsOneTensor: LoadWeights made every tensor of the
// file on its parameter's device (with a transposed copy of each of
// Hugging Face's Conv1D weights, and a converted one of each tensor of
// another dtype) before copying them in: while it ran, the device held
// its weights twice and more. Loading a chunk at a time through a
// staging buffer keeps the extra to about one tensor: the bound here is
// two of the largest (the staging buffer and a chunk converted for the
// range check, besides a few scalars of the checks), where the weights
// are many times that. In both layouts, from a file of the parameters'
// dtype and of another; the loaded values are the saved ones. (A host
// manager's tiers are all host memory: the bound is on their total.)
func TestLoadWeightsPeakIsOneTensor(t *testing.T) {
	cfg := layoutCfg
	cfg.Layers = 6 // weights of many times the largest tensor
	src := layoutGPT(t, cfg, 7)
	half := layoutGPT(t, cfg, 8)
	roundTo(half, tensor.Float16) // a float16 file holds its weights exactly
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		from  *nn.GPT
		write func(path string)
	}{
		{"nanogpt", src, func(path string) { require.NoError(t, nn.SaveWeights(path, src.Parameters(), nil)) }},
		{"hf", src, func(path string) {
			require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, src.Parameters(), nil, nn.LayoutHF))
		}},
		{"hf-f16", half, func(path string) { writeHF(t, path, half, false, tensor.Float16, nil) }},
	} {
		path := filepath.Join(dir, c.name+".safetensors")
		c.write(path)
		m := memory.NewHostManager(memory.Config{})
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.NewCPUDevice(m), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(2, 0))})
		require.NoError(t, err)
		ps := g.Parameters()
		var largest int64
		for _, p := range ps {
			largest = max(largest, p.Value.Bytes())
		}
		before := m.Stats().Total.Requested.Current
		m.ResetPeaks()
		_, err = nn.LoadWeights(path, ps)
		require.NoError(t, err, c.name)
		s := m.Stats().Total.Requested
		require.Equal(t, before, s.Current, "%s: the load keeps nothing", c.name)
		require.Greater(t, before, 12*largest, "%s: the weights dwarf the bound", c.name)
		require.LessOrEqual(t, s.Peak-before, 2*largest+256, "%s: extra bytes at the peak of the load", c.name)
		for i, p := range ps {
			require.Equal(t, c.from.Parameters()[i].Value.Float32s(), p.Value.Float32s(), "%s: %s", c.name, p.Name)
		}
		nn.Release(ps)
	}
}
