package nn_test

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

func TestParseAttention(t *testing.T) {
	for _, a := range []nn.Attention{nn.AttentionPlain, nn.AttentionFused} {
		got, err := nn.ParseAttention(a.String())
		require.NoError(t, err)
		require.Equal(t, a, got)
	}
	_, err := nn.ParseAttention("flash")
	require.Error(t, err)
}

// gptLossAndGrads runs one forward and backward pass of a small GPT (two
// blocks, hd 32, dropout 0.1, T 37: not a multiple of any tile) with the
// given attention on dev, optionally under autocast, and returns the loss
// and every parameter gradient. Both attentions see the same weights and
// the same random stream, so the same dropout masks.
func gptLossAndGrads(t *testing.T, dev tensor.Device, a nn.Attention, autocast tensor.DType, ck ...nn.Checkpointing) (float64, [][]float64) {
	cfg := nn.GPTConfig{Vocab: 64, Context: 40, Layers: 2, Heads: 2, Width: 64, Dropout: 0.1}
	g, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	g.SetAttention(a)
	if len(ck) > 0 {
		g.Checkpoint = ck[0]
	}
	const B, T = 3, 37
	rng := rand.New(rand.NewPCG(3, 4))
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for i := range xs {
		xs[i], ys[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
	}
	var loss float64
	var grads [][]float64
	c := tensor.NewCtx()
	require.NoError(t, tensor.Try(func() {
		c.WithScope(func() {
			x, y := c.FromInt32s(dev, xs, B, T), c.FromInt32s(dev, ys, B, T)
			step := func() {
				l := g.Loss(x, y)
				loss = l.Item()
				require.NoError(t, l.Backward())
			}
			if autocast != tensor.Float32 {
				amp.Autocast(c, autocast, step)
			} else {
				step()
			}
			for _, p := range g.Parameters() {
				grads = append(grads, p.Var.Grad.Float64s())
			}
			nn.ZeroGrad(g.Parameters())
		})
	}))
	return loss, grads
}

// requireGPTMatch compares fused with plain: the loss and every gradient
// within tol of the largest element of that gradient.
func requireGPTMatch(t *testing.T, dev tensor.Device, autocast tensor.DType, tol float64) {
	pl, pg := gptLossAndGrads(t, dev, nn.AttentionPlain, autocast)
	fl, fg := gptLossAndGrads(t, dev, nn.AttentionFused, autocast)
	require.InDelta(t, pl, fl, tol*math.Abs(pl), "loss")
	for i := range pg {
		var num, den float64
		for j := range pg[i] {
			num = max(num, math.Abs(fg[i][j]-pg[i][j]))
			den = max(den, math.Abs(pg[i][j]))
		}
		require.LessOrEqual(t, num, tol*den, "gradient of parameter %d", i)
	}
}

// TestGPTFusedAttentionMatchesPlain: a GPT forward and backward pass with
// fused attention equals the plain one on the CPU in float32 (dropout
// on), up to float32 rounding.
func TestGPTFusedAttentionMatchesPlain(t *testing.T) {
	requireGPTMatch(t, tensor.CPU(), tensor.Float32, 1e-5)
	t.Run("bfloat16", func(t *testing.T) { requireGPTMatch(t, tensor.CPU(), tensor.BFloat16, 32*0x1p-8) })
}

// TestGPTFusedAttentionMatchesPlainGPU: the same on cuda:0 in float32,
// and under float16 and bfloat16 autocast, where the plain path rounds
// the probabilities and the output gradient to the half type before its
// products and the fused kernels keep them in float32: the two differ by
// a few unit roundoffs of the half type (2^-11, 2^-8), amplified by the
// rest of the network's backward pass.
func TestGPTFusedAttentionMatchesPlainGPU(t *testing.T) {
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	t.Run("float32", func(t *testing.T) { requireGPTMatch(t, dev, tensor.Float32, 1e-4) })
	t.Run("float16", func(t *testing.T) { requireGPTMatch(t, dev, tensor.Float16, 32*0x1p-11) })
	t.Run("bfloat16", func(t *testing.T) { requireGPTMatch(t, dev, tensor.BFloat16, 32*0x1p-8) })
}

// TestGPTFusedAttentionCheckpointed: with fused attention, checkpointing
// whole blocks, or selectively keeping the fused op's outputs (its output
// and log-sum-exp through the op hook), gives the loss and gradients of
// the uncheckpointed model bit for bit (dropout on: the recomputation
// replays the masks).
func TestGPTFusedAttentionCheckpointed(t *testing.T) {
	l0, g0 := gptLossAndGrads(t, tensor.CPU(), nn.AttentionFused, tensor.Float32)
	for _, ck := range []nn.Checkpointing{
		{Mode: nn.CheckpointBlocks},
		{Mode: nn.CheckpointSelective},
		{Mode: nn.CheckpointSelective, Policy: checkpoint.SaveOps("Linear", "FusedCausalAttention")},
	} {
		l, g := gptLossAndGrads(t, tensor.CPU(), nn.AttentionFused, tensor.Float32, ck)
		require.Equal(t, l0, l, "%v loss", ck.Mode)
		require.Equal(t, g0, g, "%v gradients", ck.Mode)
	}
}

func TestAutoAttention(t *testing.T) {
	require.Equal(t, nn.AttentionPlain, nn.AutoAttention(tensor.CPU(), true, 64), "the CPU has no fused tensor-core kernels")
	require.Equal(t, nn.AttentionPlain, nn.AutoAttention(tensor.CPU(), false, 64))
	if dev, err := tensor.CUDA(0); err == nil {
		require.Equal(t, nn.AttentionFused, nn.AutoAttention(dev, true, 128))
		require.Equal(t, nn.AttentionFused, nn.AutoAttention(dev, false, 64), "fp32 heads of 64: 3xTF32 on tensor cores")
		require.Equal(t, nn.AttentionPlain, nn.AutoAttention(dev, false, 128), "fp32 heads of 128: float32 math, slower than plain")
	}
}
