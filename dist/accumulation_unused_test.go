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

// TestAccumulationUnused: accumulation over 3 micro-batches (2 in NoSync), w2 used only in the
// first micro-batch of rank 0, w3 only in the last of rank 1.
func TestAccumulationUnused(t *testing.T) {
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
			pass := func(mb int) error {
				h := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
				for i, p := range ps {
					if i == 1 && !(coll.Rank() == 0 && mb == 0) {
						continue
					}
					if i == 2 && !(coll.Rank() == 1 && mb == 2) {
						continue
					}
					h = autograd.Mul(h, p.Var)
				}
				return autograd.Sum(h, false).Backward()
			}
			return inScope(c, func() error {
				nn.ZeroGrad(ps)
				for mb := range 2 {
					if err := d.NoSync(func() error { return pass(mb) }); err != nil {
						d.Abort(err)
						return err
					}
				}
				if err := pass(2); err != nil {
					d.Abort(err)
					return err
				}
				if err := d.SyncGradients(); err != nil {
					return err
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
