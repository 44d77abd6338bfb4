package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/tensor"
)

// TestAllReduceMeanDuringOverlap: logging the global loss right after
// backward, before SyncGradients (a natural order), with the overlap on,
// where the rank's bucket goroutine and AllReduceMean share the
// Collective, fails with an error saying to call AllReduceMean after
// SyncGradients (it was "rank 0 called twice in one round").
func TestAllReduceMeanDuringOverlap(t *testing.T) {
	const n, k = 2, 3
	for range 20 {
		errs := runRanks(t, n, 20*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			ps := chain(t, k, 0)
			d, err := dist.New(coll, ps, dist.Options{BucketBytes: 16})
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer d.Release()
			return inScope(c, func() error {
				if err := chainLoss(c, ps, func() {}).Backward(); err != nil {
					d.Abort(err)
					return err
				}
				if _, err := d.AllReduceMean(1); err != nil {
					return err
				}
				return d.SyncGradients()
			})
		})
		for r, err := range errs {
			if err != nil {
				t.Logf("rank %d: %v", r, err)
				assert.Contains(t, err.Error(), "SyncGradients", "rank %d: the error should name the misuse", r)
			}
		}
	}
}
