package nn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLifetimeScenariosGPT: training steps of a small GPT in every
// checkpoint mode and head, with and without autocast in bfloat16, with
// RetainGraph passes, a bad id in the middle of some batches, then
// generation with a KV cache: no byte stays in use.
func TestLifetimeScenariosGPT(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 29, Context: 8, Layers: 2, Heads: 2, Width: 16}
	rng := rand.New(rand.NewPCG(5, 9))
	cpu := tensor.CPU()
	for i := 0; i < 48; i++ {
		mode := nn.CheckpointMode(rng.IntN(3))
		every := 1 + rng.IntN(2)
		fused := rng.IntN(2) == 1
		ac := rng.IntN(2) == 1
		retain := rng.IntN(2) == 1
		bad := rng.IntN(3) == 0
		train := rng.IntN(2) == 1
		name := fmt.Sprintf("mode %v every %d fused %v autocast %v retain %v bad %v train %v", mode, every, fused, ac, retain, bad, train)
		g := layoutGPT(t, cfg, uint64(i))
		g.SetTraining(train)
		g.Checkpoint = nn.Checkpointing{Mode: mode, Every: every}
		g.HeadLoss = nn.HeadLoss{Fused: fused}
		opt := nn.NewAdamW(g.Parameters(), 1e-3, 0.1)
		base := cpu.Memory().InUse()
		c := tensor.NewCtx()
		for step := 0; step < 2; step++ {
			ids := make([]int32, 2*cfg.Context)
			tg := make([]int32, len(ids))
			for j := range ids {
				ids[j], tg[j] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
			}
			if bad && step == 1 {
				ids[len(ids)-1] = int32(cfg.Vocab + 3)
			}
			err := tensor.Try(func() {
				c.WithScope(func() {
					x, y := c.FromInt32s(cpu, ids, 2, cfg.Context), c.FromInt32s(cpu, tg, 2, cfg.Context)
					var loss *autograd.Var
					fwd := func() { loss = g.Loss(x, y) }
					if ac {
						amp.Autocast(c, tensor.BFloat16, fwd)
					} else {
						fwd()
					}
					if retain {
						if e := loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}); e != nil {
							panic(e)
						}
					}
					if e := loss.Backward(); e != nil {
						panic(e)
					}
				})
			})
			if bad && step == 1 {
				require.Error(t, err, name)
			} else {
				require.NoError(t, err, name)
				require.NoError(t, opt.Step(), name)
			}
			for _, p := range g.Parameters() {
				p.ZeroGrad()
			}
		}
		require.Zero(t, c.BytesInUse(), name)
		opt.Release()
		require.Equal(t, base, cpu.Memory().InUse(), "%s: bytes left in use after training", name)

		dc := tensor.NewCtx()
		d, err := g.NewDecoder(dc)
		require.NoError(t, err)
		feed := func() {
			_, err := d.Feed([]int{1, 2, 3})
			require.NoError(t, err)
			_, err = d.Feed([]int{cfg.Vocab})
			require.Error(t, err)
			for d.Len() < cfg.Context {
				_, err = d.Feed([]int{4})
				require.NoError(t, err)
			}
			_, err = d.Feed([]int{4})
			require.ErrorIs(t, err, nn.ErrContextFull)
		}
		if ac {
			amp.Autocast(dc, tensor.BFloat16, feed)
		} else {
			feed()
		}
		d.Release()
		_, err = g.Generate(nil, []int{1, 2}, nn.GenerateOptions{MaxNewTokens: 10})
		require.NoError(t, err, name)
		require.Zero(t, dc.BytesInUse(), name)
		require.Equal(t, base, cpu.Memory().InUse(), "%s: bytes left in use after generation", name)
	}
}
