package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestUnusedOnOneRankOverlap: rank 1's graph skips w2 (a branch its batch did not take): with the
// overlap, its buckets after w2's start in SyncGradients; the means must
// be NoOverlap's.
func TestUnusedOnOneRankOverlap(t *testing.T) {
	const n, k = 2, 4
	got := map[bool][][]float32{}
	for _, noOverlap := range []bool{true, false} {
		grads := make([][]float32, n)
		errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			ps := chain(t, k, coll.Rank())
			d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16, NoOverlap: noOverlap})
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer d.Release()
			return inScope(c, func() error {
				for step := range 2 {
					nn.ZeroGrad(ps)
					h := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
					for i, p := range ps {
						if coll.Rank() == 1 && i == 1 && step == 0 {
							continue
						}
						h = autograd.Mul(h, p.Var)
					}
					if err := autograd.Sum(h, false).Backward(); err != nil {
						d.Abort(err)
						return err
					}
					if err := d.SyncGradients(); err != nil {
						return err
					}
				}
				grads[coll.Rank()] = flatGrads(ps)
				return nil
			})
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		got[noOverlap] = grads
	}
	assert.Equal(t, got[true], got[false])
	assert.Equal(t, got[false][0], got[false][1])
}
