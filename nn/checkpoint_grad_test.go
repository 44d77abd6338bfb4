package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestCheckpointGradMatchesBackward: autograd.Grad of a GPT's loss with
// respect to every parameter, through each checkpointing mode (blocks,
// selective with its policies, offloaded), gives the gradients Backward
// gives the plain model (dropout on: the recomputation replays its
// masks), changes no parameter's Grad, and leaves nothing behind.
func TestCheckpointGradMatchesBackward(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 19, Context: 8, Layers: 3, Heads: 2, Width: 16, Dropout: 0.2}
	newGPT := func() *nn.GPT {
		g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(4, 4))})
		require.NoError(t, err)
		return g
	}
	rng := rand.New(rand.NewPCG(3, 3))
	B, T := 3, cfg.Context
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for i := range xs {
		xs[i], ys[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
	}
	// grads runs one pass of g in a fresh context (the same random stream
	// each time) and returns every parameter's gradient: from Grad when
	// viaGrad, else from Backward's Grad.
	grads := func(g *nn.GPT, viaGrad bool) [][]float64 {
		c := tensor.NewCtx()
		ps := g.Parameters()
		var out [][]float64
		c.WithScope(func() {
			loss := g.Loss(c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T))
			if !viaGrad {
				require.NoError(t, loss.Backward())
				for _, p := range ps {
					out = append(out, p.Grad.Float64s())
				}
				nn.ZeroGrad(ps)
				return
			}
			vars := make([]*autograd.Var, len(ps))
			for i, p := range ps {
				vars[i] = p.Var
			}
			gs, err := autograd.Grad(loss, vars, autograd.GradOptions{})
			require.NoError(t, err)
			for i, p := range ps {
				require.Nil(t, p.Grad, "%s: Grad changes no parameter's Grad", p.Name)
				out = append(out, gs[i].Float64s())
			}
		})
		require.Zero(t, c.BytesInUse())
		return out
	}
	base := newGPT()
	want := grads(base, false)
	nn.Release(base.Parameters())
	for name, ck := range checkpointings {
		g := newGPT()
		g.Checkpoint = ck
		got := grads(g, true)
		for i, p := range g.Parameters() {
			require.InDeltaSlice(t, want[i], got[i], 1e-6, "%s: %s", name, p.Name)
		}
		nn.Release(g.Parameters())
	}
	require.Zero(t, tensor.LeakedTensors())
}
