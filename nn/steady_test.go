package nn_test

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainSteps trains a small GPT for n steps with no manual freeing in the
// loop and returns the bytes in use after each step.
func trainSteps(t *testing.T, g *nn.GPT, n int) []int64 {
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 1e-3, 0.1)
	defer opt.Release()
	rng := rand.New(rand.NewPCG(5, 5))
	B, T, V := 2, g.Config.Context, g.Config.Vocab
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	mem := tensor.CPU().Memory()
	var inUse []int64
	for range n {
		for i := range xs {
			xs[i], ys[i] = int32(rng.IntN(V)), int32(rng.IntN(V))
		}
		err := tensor.Try(func() {
			tensor.WithScope(func() {
				loss := g.Loss(tensor.FromInt32s(tensor.CPU(), xs, B, T), tensor.FromInt32s(tensor.CPU(), ys, B, T))
				require.NoError(t, loss.Backward())
				_, err := nn.ClipGradNorm(ps, 1)
				require.NoError(t, err)
				require.NoError(t, opt.Step())
				nn.ZeroGrad(ps)
			})
		})
		require.NoError(t, err)
		inUse = append(inUse, mem.InUse())
	}
	return inUse
}

// TestSteadyStateMemory is DESIGN.md's lifetime rule: after every step
// the bytes in use equal those after the first step, with no manual
// freeing in the training loop.
func TestSteadyStateMemory(t *testing.T) {
	for _, dropout := range []bool{false, true} {
		cfg := nn.GPTConfig{Vocab: 17, Context: 8, Layers: 2, Heads: 2, Width: 16}
		if dropout {
			cfg.Dropout = 0.1
		}
		before := settledInUse()
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
		require.NoError(t, err)
		inUse := trainSteps(t, g, 50)
		for i, b := range inUse {
			require.Equal(t, inUse[0], b, "bytes in use after step %d differ from step 1", i+1)
		}
		st := tensor.CPU().Memory().Stats()
		params := st.Roles[memory.RoleParameter].Allocated.Current + st.Roles[memory.RoleEmbedding].Allocated.Current
		require.Positive(t, params)
		require.Zero(t, st.Roles[memory.RoleActivation].Requested.Current, "no activation outlives its step")
		require.Zero(t, st.Roles[memory.RoleGradient].Requested.Current, "gradients were released by ZeroGrad")
		nn.Release(g.Parameters())
		require.Equal(t, before, tensor.CPU().Memory().InUse(), "everything returned")
	}
	require.Zero(t, tensor.LeakedTensors())
}

func TestSaveLoadWeights(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 11, Context: 6, Layers: 1, Heads: 2, Width: 8}
	opts := func(seed uint64) nn.Options {
		return nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 0))}
	}
	a, err := nn.NewGPT(cfg, opts(1))
	require.NoError(t, err)
	b, err := nn.NewGPT(cfg, opts(2))
	require.NoError(t, err)
	defer nn.Release(a.Parameters())
	defer nn.Release(b.Parameters())
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, nn.SaveWeights(path, a.Parameters(), map[string]string{"k": "v"}))
	meta, err := nn.LoadWeights(path, b.Parameters())
	require.NoError(t, err)
	require.Equal(t, "v", meta["k"])
	for i, p := range a.Parameters() {
		require.Equal(t, p.Value.Float32s(), b.Parameters()[i].Value.Float32s(), p.Name)
	}
	// A model of another shape is refused with the name and both shapes.
	cfg.Width = 16
	c, err := nn.NewGPT(cfg, opts(3))
	require.NoError(t, err)
	defer nn.Release(c.Parameters())
	_, err = nn.LoadWeights(path, c.Parameters())
	require.ErrorContains(t, err, "transformer.wte.weight")
	require.ErrorContains(t, err, "[11 8]")
	_, err = nn.LoadWeights(filepath.Join(t.TempDir(), "missing.safetensors"), b.Parameters())
	require.Error(t, err)
}
