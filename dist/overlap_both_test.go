package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// overlapBoth runs step on n local ranks, each with a chain of k
// parameters (chain, seeded by the rank) in a DataParallel of 16-byte
// buckets, once with NoOverlap and once with the overlap, and returns
// each run's gradients by rank (flatGrads after step), failing t on any
// rank's error. step runs in the rank's scope; an error it returns has
// aborted the group or is the collective's.
func overlapBoth(t *testing.T, n, k int, step func(c *tensor.Ctx, rank int, d *dist.DataParallel, ps []*nn.Parameter) error) map[bool][][]float32 {
	t.Helper()
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
				if err := step(c, coll.Rank(), d, ps); err != nil {
					return err
				}
				grads[coll.Rank()] = flatGrads(ps)
				return nil
			})
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d, NoOverlap %v", r, noOverlap)
		}
		got[noOverlap] = grads
	}
	return got
}
