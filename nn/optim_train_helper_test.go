package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainRun sets up a trainAdamW run.
type trainRun struct {
	checkpoint bool            // checkpoint the blocks
	maxNorm    float64         // ClipGradNorm's max norm, every step
	optimizer  func(*nn.AdamW) // sets the optimizer's options (nil: plain)
	// released checks after each Step that every gradient was released and
	// that the gradients' bytes left the device's allocated memory (a
	// pipelined optimizer).
	released bool
	wait     bool // tensor.WaitOverlapped before reading the weights
	// guarded clips and updates through ClipGradNormGuarded,
	// PrepareGuarded and StepGuarded (the step a CUDA graph captures).
	guarded bool
}

// trainAdamW trains a small GPT for a few steps with AdamW, clipping
// every step, as run says, and returns the losses and the final weights
// (TestAdamWOverlapSameBits, TestAdamWPipelineSameBits).
func trainAdamW(t *testing.T, dev tensor.Device, prec amp.State, run trainRun) ([]float64, [][]float32) {
	t.Helper()
	cfg := nn.GPTConfig{Vocab: 64, Context: 32, Layers: 3, Heads: 2, Width: 64}
	g, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rand.New(rand.NewPCG(3, 4))})
	require.NoError(t, err)
	if run.checkpoint {
		g.Checkpoint = nn.Checkpointing{Mode: nn.CheckpointBlocks}
	}
	ps := g.Parameters()
	defer nn.Release(ps)
	opt := nn.NewAdamW(ps, 1e-2, 0.1)
	if run.optimizer != nil {
		run.optimizer(opt)
	}
	defer opt.Release()
	var guard *tensor.StepGuard
	var args *tensor.AdamWArgs
	if run.guarded {
		guard, err = tensor.NewStepGuard(dev)
		require.NoError(t, err)
		defer guard.Release()
		args, err = tensor.NewAdamWArgs(dev)
		require.NoError(t, err)
		defer args.Release()
	}
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
				var l *autograd.Var
				amp.With(c, prec, func() {
					l = g.Loss(x, y)
					require.NoError(t, l.Backward())
				})
				if run.guarded {
					require.NoError(t, nn.ClipGradNormGuarded(ps, l.Value, run.maxNorm, guard))
					require.NoError(t, opt.PrepareGuarded(args))
					require.NoError(t, opt.StepGuarded(args, guard))
					r, err := guard.Result()
					require.NoError(t, err)
					require.False(t, r.Skipped)
					opt.CommitGuarded(r.Skipped)
					losses = append(losses, r.Loss)
					nn.ZeroGrad(ps)
					return
				}
				losses = append(losses, l.Item())
				_, err := nn.ClipGradNorm(ps, run.maxNorm)
				require.NoError(t, err)
				var grads, before int64
				if run.released {
					for _, p := range ps {
						grads += p.Grad.Bytes()
					}
					before = dev.Memory().Stats().Roles[memory.RoleGradient].Requested.Current
				}
				require.NoError(t, opt.Step())
				if run.released {
					for _, p := range ps {
						require.Nil(t, p.Grad, "%s's gradient after a pipelined step", p.Name)
					}
					after := dev.Memory().Stats().Roles[memory.RoleGradient].Requested.Current
					require.Equal(t, before-grads, after, "gradient bytes allocated after a pipelined step")
				}
				nn.ZeroGrad(ps)
			})
		}))
	}
	if run.wait {
		require.NoError(t, tensor.WaitOverlapped(dev))
	}
	var w [][]float32
	for _, p := range ps {
		w = append(w, p.Value.Float32s())
	}
	return losses, w
}

// onCPUAndCUDA runs check on the CPU in float32 and on cuda:0 in float32
// and bf16 (skipped without a GPU, unless STRATA_REQUIRE_GPU is set).
func onCPUAndCUDA(t *testing.T, check func(t *testing.T, dev tensor.Device, prec amp.State)) {
	t.Run("cpu", func(t *testing.T) { check(t, tensor.CPU(), amp.State{}) })
	t.Run("cuda", func(t *testing.T) {
		dev := cudaOrSkip(t)
		check(t, dev, amp.State{})
		bf, err := amp.ParsePrecision("bf16")
		require.NoError(t, err)
		check(t, dev, bf)
	})
}

// cudaOrSkip returns cuda:0, or skips the test without one (fails when
// STRATA_REQUIRE_GPU is set): the package's internal tests' gpuOrSkip.
var cudaOrSkip = nn.GPUOrSkip
