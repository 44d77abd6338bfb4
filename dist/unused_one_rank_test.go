package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestUnusedOnOneRankOverlap: rank 1's graph skips w2 (a branch its batch did not take): with the
// overlap, its buckets after w2's start in SyncGradients; the means must
// be NoOverlap's.
func TestUnusedOnOneRankOverlap(t *testing.T) {
	got := overlapBoth(t, 2, 4, func(c *tensor.Ctx, rank int, d *dist.DataParallel, ps []*nn.Parameter) error {
		for step := range 2 {
			nn.ZeroGrad(ps)
			h := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
			for i, p := range ps {
				if rank == 1 && i == 1 && step == 0 {
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
		return nil
	})
	assert.Equal(t, got[true], got[false])
	assert.Equal(t, got[false][0], got[false][1])
}
