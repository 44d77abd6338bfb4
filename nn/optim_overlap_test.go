package nn_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainOverlap trains a small GPT for a few steps with AdamW, its update
// overlapped or not, and returns the losses and the final weights.
func trainOverlap(t *testing.T, dev tensor.Device, prec amp.State, overlap bool) ([]float64, [][]float32) {
	t.Helper()
	cfg := nn.GPTConfig{Vocab: 64, Context: 32, Layers: 3, Heads: 2, Width: 64}
	g, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(3, 4))})
	require.NoError(t, err)
	ps := g.Parameters()
	defer nn.Release(ps)
	opt := nn.NewAdamW(ps, 1e-2, 0.1)
	opt.Overlap = overlap
	defer opt.Release()
	rng := rand.New(rand.NewPCG(5, 6))
	c := tensor.NewCtx()
	var losses []float64
	for range 4 {
		xs, ys := make([]int32, 2*cfg.Context), make([]int32, 2*cfg.Context)
		for i := range xs {
			xs[i], ys[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
		}
		require.NoError(t, tensor.Try(func() {
			c.WithScope(func() {
				x, y := c.FromInt32s(dev, xs, 2, cfg.Context), c.FromInt32s(dev, ys, 2, cfg.Context)
				amp.With(c, prec, func() {
					l := g.Loss(x, y)
					require.NoError(t, l.Backward())
					losses = append(losses, l.Item())
				})
				_, err := nn.ClipGradNorm(ps, 1)
				require.NoError(t, err)
				require.NoError(t, opt.Step())
				nn.ZeroGrad(ps)
			})
		}))
	}
	var w [][]float32
	for _, p := range ps {
		w = append(w, p.Value.Float32s())
	}
	return losses, w
}

// TestAdamWOverlapSameBits: an overlapped optimizer gives the losses and
// weights of the plain one, bit for bit; on a GPU the next forward pass
// runs while the update is still being queued on the side stream.
func TestAdamWOverlapSameBits(t *testing.T) {
	check := func(t *testing.T, dev tensor.Device, prec amp.State) {
		l0, w0 := trainOverlap(t, dev, prec, false)
		l1, w1 := trainOverlap(t, dev, prec, true)
		require.Equal(t, l0, l1, "losses")
		require.Equal(t, w0, w1, "weights")
	}
	t.Run("cpu", func(t *testing.T) { check(t, tensor.CPU(), amp.State{}) })
	t.Run("cuda", func(t *testing.T) {
		dev, err := tensor.CUDA(0)
		if err != nil {
			if os.Getenv("STRATA_REQUIRE_GPU") != "" {
				t.Fatalf("STRATA_REQUIRE_GPU is set: %v", err)
			}
			t.Skipf("no CUDA device: %v", err)
		}
		check(t, dev, amp.State{})
		bf, err := amp.ParsePrecision("bf16")
		require.NoError(t, err)
		check(t, dev, bf)
	})
}
