package nn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// stepper trains a GPT with AdamW on a fixed random stream of batches.
type stepper struct {
	g   *nn.GPT
	opt *nn.AdamW
	src *rand.PCG // the data stream's generator
	rng *rand.Rand
}

func newStepper(t *testing.T, cfg nn.GPTConfig, seed uint64) *stepper {
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 0))})
	require.NoError(t, err)
	opt := nn.NewAdamW(g.Parameters(), 1e-2, 0.1)
	opt.Beta2 = 0.95
	t.Cleanup(func() { opt.Release(); nn.Release(g.Parameters()) })
	src := rand.NewPCG(7, 7)
	return &stepper{g: g, opt: opt, src: src, rng: rand.New(src)}
}

func (s *stepper) steps(t *testing.T, n int) []float32 {
	B, T, V := 2, s.g.Config.Context, s.g.Config.Vocab
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	var losses []float32
	for range n {
		for i := range xs {
			xs[i], ys[i] = int32(s.rng.IntN(V)), int32(s.rng.IntN(V))
		}
		require.NoError(t, tensor.Try(func() {
			tensor.WithScope(func() {
				loss := s.g.Loss(tensor.FromInt32s(tensor.CPU(), xs, B, T), tensor.FromInt32s(tensor.CPU(), ys, B, T))
				require.NoError(t, loss.Backward())
				losses = append(losses, loss.Value.Float32s()[0])
				require.NoError(t, s.opt.Step())
				nn.ZeroGrad(s.g.Parameters())
			})
		}))
	}
	return losses
}

// A training state saved after 3 steps and loaded into a fresh model and
// optimizer continues bit for bit as the original does.
func TestTrainStateResumesExactly(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 13, Context: 6, Layers: 2, Heads: 2, Width: 8}
	a := newStepper(t, cfg, 1)
	a.steps(t, 3)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, a.g.Parameters(), a.opt, map[string]string{"run.step": "3"}))
	rngState, err := a.src.MarshalBinary() // not used by the model: the stepper's data stream
	require.NoError(t, err)
	want := a.steps(t, 3)

	b := newStepper(t, cfg, 99) // other initial weights
	b.opt.Release()             // nothing to release yet; loading replaces the moments
	require.NoError(t, b.src.UnmarshalBinary(rngState))
	meta, err := nn.LoadTrainState(path, b.g.Parameters(), b.opt)
	require.NoError(t, err)
	require.Equal(t, "3", meta["run.step"])
	require.Equal(t, "3", meta[nn.OptimizerStepKey])
	require.Equal(t, "0.9,0.95", meta["optimizer.betas"])
	require.Equal(t, 3, b.opt.Steps())
	got := b.steps(t, 3)
	require.Equal(t, want, got, "losses after resuming")
	for i, p := range a.g.Parameters() {
		require.Equal(t, p.Value.Float32s(), b.g.Parameters()[i].Value.Float32s(), p.Name)
	}
}

func TestTrainStateRefusesMismatches(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 13, Context: 6, Layers: 1, Heads: 2, Width: 8}
	a := newStepper(t, cfg, 1)
	a.steps(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, a.g.Parameters(), a.opt, nil))
	require.ErrorContains(t, nn.SaveTrainState(context.Background(), path, a.g.Parameters(), a.opt, map[string]string{"optimizer.x": "1"}), "reserved")

	cfg2 := cfg
	cfg2.Width = 16
	c := newStepper(t, cfg2, 1)
	before := c.g.Parameters()[0].Value.Float32s()
	_, err := nn.LoadTrainState(path, c.g.Parameters(), c.opt)
	require.ErrorContains(t, err, "the model wants")
	require.Equal(t, before, c.g.Parameters()[0].Value.Float32s(), "a refused file changes nothing")

	weights := filepath.Join(dir, "w.safetensors")
	require.NoError(t, nn.SaveWeights(weights, a.g.Parameters(), nil))
	_, err = nn.LoadTrainState(weights, a.g.Parameters(), a.opt)
	require.ErrorContains(t, err, "not a training state file")

	// A state file names more than the weights: LoadWeights refuses it,
	// and a model with fewer layers is refused with the names.
	_, err = nn.LoadWeights(path, a.g.Parameters())
	require.ErrorContains(t, err, "unexpected [optimizer.exp_avg.")
	cfg3 := cfg
	cfg3.Layers = 2
	d := newStepper(t, cfg3, 1)
	_, err = nn.LoadTrainState(path, d.g.Parameters(), d.opt)
	require.ErrorContains(t, err, "missing [transformer.h.1.")

	_, err = nn.LoadTrainState(filepath.Join(dir, "none"), a.g.Parameters(), a.opt)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestNonFinite(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 13, Context: 6, Layers: 1, Heads: 2, Width: 8}
	a := newStepper(t, cfg, 1)
	name, err := nn.NonFinite(a.g.Parameters())
	require.NoError(t, err)
	require.Empty(t, name)
	p := a.g.Parameters()[3]
	v := p.Value.Float32s()
	v[len(v)-1] = float32(math.NaN())
	tensor.WithScope(func() { p.Value.CopyFrom(tensor.FromFloat32s(tensor.CPU(), v, p.Value.Shape()...)) })
	name, err = nn.NonFinite(a.g.Parameters())
	require.NoError(t, err)
	require.Equal(t, p.Name, name)
}

// An AdamW step that runs out of memory while allocating its moments
// changes no parameter, does not count, and leaves nothing allocated (on
// a device of its own, whose bytes no other test moves).
func TestAdamWStepOutOfMemoryChangesNothing(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	dev := tensor.NewCPUDevice(m)
	cfg := nn.GPTConfig{Vocab: 13, Context: 6, Layers: 1, Heads: 2, Width: 8}
	g, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 0))})
	require.NoError(t, err)
	ps := g.Parameters()
	defer nn.Release(ps)
	var before [][]float32
	for _, p := range ps {
		p.Grad, err = tensor.NewKept(dev, tensor.Float32, memory.RoleGradient, p.Value.Shape()...)
		require.NoError(t, err)
		p.Grad.Fill(0.5)
		before = append(before, p.Value.Float32s())
	}
	defer nn.ZeroGrad(ps)
	base := m.InUse()
	for k := int64(1); k <= 2*int64(len(ps)); k++ { // two moments a parameter
		opt := nn.NewAdamW(ps, 1e-2, 0.1)
		m.FailAllocation(k)
		err := opt.Step()
		m.FailAllocation(0)
		require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
		require.Zero(t, opt.Steps())
		for i, p := range ps {
			require.Equal(t, before[i], p.Value.Float32s(), p.Name)
		}
		opt.Release()
		require.Equal(t, base, m.InUse(), "allocation %d: nothing left", k)
	}
	opt := nn.NewAdamW(ps, 1e-2, 0.1)
	require.NoError(t, opt.Step())
	require.Equal(t, 1, opt.Steps())
	opt.Release()
}
