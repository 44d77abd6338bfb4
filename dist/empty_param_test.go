package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestEmptyParam: a parameter of zero elements goes through New,
// BroadcastParameters, SyncGradients and ZeroAdamW.
func TestEmptyParam(t *testing.T) {
	for _, noOverlap := range []bool{true, false} {
		errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			ps := []*nn.Parameter{shaped(t, "a", tensor.Float32, 4), shaped(t, "empty", tensor.Float32, 0)}
			d, err := dist.New(coll, ps, dist.Options{BucketBytes: 4, NoOverlap: noOverlap})
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer d.Release()
			if err := d.BroadcastParameters(); err != nil {
				return err
			}
			if err := setGrads(ps, 1); err != nil {
				d.Abort(err)
				return err
			}
			if err := d.SyncGradients(); err != nil {
				return err
			}
			z, err := dist.NewZeroAdamW(coll, ps, 0.1, 0)
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer z.Release()
			return z.Step()
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d noOverlap=%v", r, noOverlap)
		}
	}
}
