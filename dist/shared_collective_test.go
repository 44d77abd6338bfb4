package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestTwoDataParallelsOneCollective: two DataParallels over disjoint
// parameters of one model share each rank's Collective (one backward
// pass, then each SyncGradients): with the overlap as without, no error
// and the same mean on every rank. The overlap ran the two's bucket
// goroutines concurrently on one local rank ("called twice in one
// round").
func TestTwoDataParallelsOneCollective(t *testing.T) {
	for trial := range 10 {
		got := map[bool][][]float32{}
		for _, noOverlap := range []bool{true, false} {
			grads := make([][]float32, 2)
			errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				ps := chain(t, 6, coll.Rank())
				var ds []*dist.DataParallel
				for _, part := range [][]*nn.Parameter{ps[:3], ps[3:]} {
					d, err := dist.New(coll, part, dist.Options{BucketBytes: 16, NoOverlap: noOverlap})
					if err != nil {
						coll.Abort(err)
						return err
					}
					defer d.Release()
					ds = append(ds, d)
				}
				return inScope(c, func() error {
					for range 2 {
						nn.ZeroGrad(ps)
						h := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
						for _, p := range ps {
							h = autograd.Mul(h, p.Var)
						}
						if err := autograd.Sum(h, false).Backward(); err != nil {
							coll.Abort(err)
							return err
						}
						for _, d := range ds {
							if err := d.SyncGradients(); err != nil {
								return err
							}
						}
					}
					grads[coll.Rank()] = flatGrads(ps)
					return nil
				})
			})
			for r, err := range errs {
				require.NoError(t, err, "trial %d, rank %d, NoOverlap %v", trial, r, noOverlap)
			}
			require.Equal(t, grads[0], grads[1])
			got[noOverlap] = grads
		}
		require.Equal(t, got[true], got[false])
	}
}
