package dist_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestSyncGradientsRefusesAViewGradient: a gradient set to a
// non-contiguous view cannot take the mean; SyncGradients says which
// parameter, before any collective call, with and without the overlap
// (it used to fail only while copying the means back, after every
// all-reduce, with CopyFrom's error naming no parameter).
func TestSyncGradientsRefusesAViewGradient(t *testing.T) {
	for _, noOverlap := range []bool{true, false} {
		var calls atomic.Int32
		errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			rec := &recorder{Collective: coll, onCall: func(string) { calls.Add(1) }}
			w, a := shaped(t, "w", tensor.Float32, 3, 2), shaped(t, "a", tensor.Float32, 4)
			ps := []*nn.Parameter{w, a} // a's bucket is first
			d, err := dist.New(rec, ps, dist.Options{BucketBytes: 1, NoOverlap: noOverlap})
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer d.Release()
			if err := setGrads([]*nn.Parameter{a}, 1); err != nil {
				d.Abort(err)
				return err
			}
			g, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleGradient, 2, 3)
			if err != nil {
				d.Abort(err)
				return err
			}
			g.Fill(1)
			w.Grad = g.Transpose(0, 1)
			tensor.Keep(w.Grad)
			g.Release()
			return d.SyncGradients()
		})
		for r, err := range errs {
			require.Error(t, err, "rank %d noOverlap=%v", r, noOverlap)
			if !errors.Is(err, dist.ErrAborted) {
				require.ErrorIs(t, err, tensor.ErrArgument, "rank %d noOverlap=%v", r, noOverlap)
				require.ErrorContains(t, err, `parameter "w" has a gradient that is not contiguous`, "rank %d noOverlap=%v", r, noOverlap)
			}
		}
		assert.Zero(t, calls.Load(), "noOverlap=%v: collective calls before the error", noOverlap)
	}
}
