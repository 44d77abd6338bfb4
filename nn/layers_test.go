package nn_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestConstructorErrors: every size a user can get wrong is an error
// wrapping tensor.ErrArgument, not a panic.
func TestConstructorErrors(t *testing.T) {
	o := nn.Options{}
	for name, f := range map[string]func() error{
		"Linear in 0":        func() error { _, err := nn.NewLinear(o, "l", 0, 3, true, 0); return err },
		"Linear out -1":      func() error { _, err := nn.NewLinear(o, "l", 3, -1, true, 0); return err },
		"Linear std -1":      func() error { _, err := nn.NewLinear(o, "l", 3, 3, true, -1); return err },
		"Linear std NaN":     func() error { _, err := nn.NewLinear(o, "l", 3, 3, true, math.NaN()); return err },
		"Linear int32":       func() error { _, err := nn.NewLinear(nn.Options{DType: tensor.Int32}, "l", 3, 3, true, 0); return err },
		"Embedding num 0":    func() error { _, err := nn.NewEmbedding(o, "e", 0, 3, 0); return err },
		"Embedding dim 0":    func() error { _, err := nn.NewEmbedding(o, "e", 3, 0, 0); return err },
		"LayerNorm dim 0":    func() error { _, err := nn.NewLayerNorm(o, "ln", 0); return err },
		"RMSNorm dim -2":     func() error { _, err := nn.NewRMSNorm(o, "n", -2); return err },
		"MLP dim 0":          func() error { _, err := nn.NewMLP(o, "m", 0, 0.02); return err },
		"FeedForward size 0": func() error { _, err := nn.NewFeedForward(o, "f", nil, 2, 0); return err },
	} {
		err := f()
		require.ErrorIs(t, err, tensor.ErrArgument, name)
	}
	_, err := nn.NewLinear(o, "fc1", 0, 3, true, 0)
	require.EqualError(t, err, `nn: NewLinear "fc1": in = 0, want > 0: invalid argument`)
	require.Panics(t, func() { nn.Must(nn.NewLinear(o, "fc1", 0, 3, true, 0)) })
}

// TestConstructorOutOfMemory: a model that does not fit is an error, and
// what was allocated before is freed.
func TestConstructorOutOfMemory(t *testing.T) {
	limit := int64(4 << 20)
	noSpill := memory.HybridPolicy() // the limit is the limit: no offload tier
	noSpill.Spill = false
	m := memory.NewHostManager(memory.Config{Policy: noSpill, Limits: [memory.NumTiers]int64{memory.TierDevice: limit, memory.TierManaged: limit}})
	defer m.Close()
	o := nn.Options{Device: tensor.NewCPUDevice(m)}
	l, err := nn.NewLinear(o, "big", 2048, 1024, true, 0) // 8 MiB
	if err == nil {
		nn.Release(l.Parameters())
	}
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	cfg := nn.GPTConfig{Vocab: 64, Context: 8, Layers: 2, Heads: 2, Width: 256} // the second block does not fit
	g, err := nn.NewGPT(cfg, o)
	if err == nil {
		nn.Release(g.Parameters())
	}
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.Zero(t, m.InUse(), "nothing stays allocated")
}

// TestOptionsDefaults: the zero Options builds on the CPU in float32 from
// the default stream; a seeded Rng repeats.
func TestOptionsDefaults(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "fc", 3, 2, true, 0))
	defer nn.Release(l.Parameters())
	require.Equal(t, tensor.Float32, l.Weight.Value.DType())
	require.Equal(t, tensor.CPU(), l.Weight.Value.Device())
	require.Equal(t, "fc.weight", l.Weight.Name)
	require.True(t, l.Weight.Decay)
	require.False(t, l.Bias.Decay)

	seeded := func(std float64) []float32 {
		o := nn.Options{Rng: rand.New(rand.NewPCG(1, 2))}
		l := nn.Must(nn.NewLinear(o, "fc", 3, 2, true, std))
		defer nn.Release(l.Parameters())
		return l.Weight.Value.Float32s()
	}
	require.Equal(t, seeded(0), seeded(0))
	require.Equal(t, seeded(0.02), seeded(0.02))
	require.NotEqual(t, seeded(0), seeded(0.02))

	// std > 0: normal(0, std) weights, zero bias (GPT-2's initialisation).
	g := nn.Must(nn.NewLinear(nn.Options{}, "g", 64, 64, true, 0.02))
	defer nn.Release(g.Parameters())
	var ss float64
	for _, v := range g.Weight.Value.Float64s() {
		ss += v * v
	}
	require.InDelta(t, 0.02, math.Sqrt(ss/4096), 0.002)
	require.Equal(t, make([]float32, 64), g.Bias.Value.Float32s())

	// Two layers from the default stream differ; building from many
	// goroutines at once is safe.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			a := nn.Must(nn.NewLinear(nn.Options{}, "a", 4, 4, false, 0))
			b := nn.Must(nn.NewEmbedding(nn.Options{}, "b", 4, 4, 0))
			defer nn.Release(nn.Collect(a, b))
			require.NotEqual(t, a.Weight.Value.Float32s(), b.Weight.Value.Float32s())
		})
	}
	wg.Wait()

	// A GPT from the zero Options.
	gpt, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 4, Layers: 1, Heads: 1, Width: 8}, nn.Options{})
	require.NoError(t, err)
	nn.Release(gpt.Parameters())
}
