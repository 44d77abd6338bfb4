package dist_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
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
}
