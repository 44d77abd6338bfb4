package dist_test

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestZeroAdamWMatchesAdamW: with the optimizer state sharded (ZeRO-1),
// n ranks train exactly as with nn.AdamW on every rank: the same losses
// and the same parameters, bit for bit (AdamW is element-wise), and the
// ranks stay identical. n = 3 pads the flat space.
func TestZeroAdamWMatchesAdamW(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := 2
			xs, ys := batches(ddpSteps, n*b, tinyGPT.Context, tinyGPT.Vocab)
			wantLoss, wantParams, _, errs := trainRanks(t, n, b, xs, ys, false)
			for r, err := range errs {
				require.NoError(t, err, "AdamW, rank %d", r)
			}
			gotLoss, gotParams, _, errs := trainRanks(t, n, b, xs, ys, true)
			for r, err := range errs {
				require.NoError(t, err, "ZeroAdamW, rank %d", r)
			}
			for s := range ddpSteps {
				for r := range n {
					assert.Equal(t, wantLoss[0][s], gotLoss[r][s], "step %d: rank %d's mean loss", s, r)
					assert.True(t, equalBits(wantParams[0][s], gotParams[r][s]), "step %d: rank %d's parameters differ from AdamW's", s, r)
				}
			}
		})
	}
}

func TestZeroAdamWShards(t *testing.T) {
	g := newGPT(t, tinyGPT, 1)
	total := nn.CountParams(g.Parameters())
	for _, n := range []int{1, 3, 4} {
		z, err := dist.NewZeroAdamW(dist.NewLocalGroup(n)[0], g.Parameters(), 1e-3, 0)
		require.NoError(t, err)
		assert.Equal(t, (total+n-1)/n, z.ShardElements(), "ranks %d", n)
		z.Release()
	}
	_, err := dist.NewZeroAdamW(nil, g.Parameters(), 1e-3, 0)
	assert.Error(t, err)
	// A nil parameter is refused with its index, as nn's optimizers do.
	_, err = dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], append(g.Parameters()[:1:1], nil), 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "parameter 1 is nil")
}

// A parameter that first gets a gradient at the second step is
// bias-corrected from its own first update, as nn.AdamW does (PyTorch's
// per-parameter step): the ranks' parameters equal nn.AdamW's bit for bit.
func TestZeroAdamWLateParameter(t *testing.T) {
	const n, steps = 2, 3
	// Each rank's goroutine has its own context (c): scopes of one Ctx are
	// a stack that one goroutine uses at a time.
	grad := func(c *tensor.Ctx, p *nn.Parameter, s int) {
		g := c.Full(tensor.CPU(), tensor.Float32, 0, p.Value.Numel())
		vals := g.Float32s()
		for i := range vals {
			vals[i] = float32(math.Sin(float64(7*i+13*s+1))) * 0.01
		}
		g.CopyFrom(c.FromFloat32s(tensor.CPU(), vals, p.Value.Numel()))
		tensor.Keep(g)
		p.ZeroGrad()
		p.Grad = g.Reshape(p.Value.Shape()...)
		tensor.Keep(p.Grad)
		g.Release()
	}
	// late is the last parameter: no gradient at the first step.
	setGrads := func(c *tensor.Ctx, ps []*nn.Parameter, s int) {
		for i, p := range ps {
			if s == 0 && i == len(ps)-1 {
				p.ZeroGrad()
				continue
			}
			grad(c, p, s)
		}
	}
	ref := newGPT(t, tinyGPT, 3)
	opt := nn.NewAdamW(ref.Parameters(), 1e-2, 0.1)
	defer opt.Release()
	var want [][]float32
	tensor.WithScope(func() {
		for s := range steps {
			setGrads(tensor.Background(), ref.Parameters(), s)
			require.NoError(t, opt.Step())
		}
		for _, p := range ref.Parameters() {
			want = append(want, p.Value.Float32s())
		}
	})
	group := dist.NewLocalGroup(n)
	got := make([][][]float32, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		g := newGPT(t, tinyGPT, 3)
		wg.Go(func() {
			c := tensor.NewCtx()
			c.WithScope(func() {
				z, err := dist.NewZeroAdamW(group[r], g.Parameters(), 1e-2, 0.1)
				if err != nil {
					errs[r] = err
					return
				}
				defer z.Release()
				for s := range steps {
					setGrads(c, g.Parameters(), s)
					if errs[r] = z.Step(); errs[r] != nil {
						return
					}
				}
				for _, p := range g.Parameters() {
					got[r] = append(got[r], p.Value.Float32s())
				}
			})
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		for i := range want {
			require.True(t, equalBits(want[i], got[r][i]), "rank %d, parameter %d differs from nn.AdamW's", r, i)
		}
	}
}
