package dist_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestGradChangedBeforeSync: a gradient changed in place between backward
// and SyncGradients (an unscale, a per-rank clip, a hand-written
// regulariser) is part of the mean without the overlap; with it, whose
// bucket was copied when the hook fired, SyncGradients refuses it with an
// error naming the parameter, where the mean of the stale copies silently
// overwrote the change.
func TestGradChangedBeforeSync(t *testing.T) {
	const n, k = 2, 3
	got := map[bool][]float32{}
	failed := false
	for _, noOverlap := range []bool{true, false} {
		grads := make([][]float32, n)
		errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			ps := chain(t, k, 0)
			d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16, NoOverlap: noOverlap})
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer d.Release()
			err = inScope(c, func() error {
				if err := chainLoss(c, ps, func() {}).Backward(); err != nil {
					return err
				}
				for _, p := range ps {
					p.Grad.ScaleInPlace(0.5) // e.g. amp's Unscale before the sync
				}
				if err := d.SyncGradients(); err != nil {
					return err
				}
				grads[coll.Rank()] = flatGrads(ps)
				return nil
			})
			if err != nil {
				d.Abort(err)
			}
			return err
		})
		for r, err := range errs {
			if !noOverlap && err != nil {
				failed = true // refusing the changed gradient is acceptable
				t.Logf("rank %d: %v", r, err)
				continue
			}
			require.NoError(t, err, "rank %d", r)
		}
		got[noOverlap] = grads[0]
	}
	if !failed {
		assert.Equal(t, got[true], got[false], "a gradient changed before SyncGradients: the overlap silently dropped the change (NoOverlap is documented to give the same bits)")
	}
}

var _ = fmt.Sprintf
var _ = nn.ZeroGrad
