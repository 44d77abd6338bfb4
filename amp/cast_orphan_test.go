package amp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestCastCachesOnlyKeptTensors: the region's cache holds copies of kept
// tensors (weights), as Cast's doc says. An orphan, a view of a weight
// made afresh at each use (w.T() in a context of its own), got a copy in
// the cache too, under the view's pointer: a copy the size of the view a
// call, held until the region closed although the view was released (a
// loop inside one region grew by one every step). And a kept tensor used
// after its release got the copy of its old values instead of
// ErrReleased.
func TestCastCachesOnlyKeptTensors(t *testing.T) {
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 64, 64)
	require.NoError(t, err)
	defer w.Release()
	w.Fill(1)
	bg := tensor.Background()
	c := tensor.NewCtx()
	c.WithScope(func() {
		amp.Autocast(c, tensor.BFloat16, func() {
			before := bg.BytesInUse()
			for range 3 {
				v := w.T() // an orphan: made from a kept tensor alone
				require.Nil(t, v.Ctx())
				require.False(t, v.Kept())
				l := amp.Cast(c, v, tensor.BFloat16)
				assert.Equal(t, float32(1), l.Float32s()[0])
				l.Release()
				v.Release()
				assert.Equal(t, before, bg.BytesInUse(), "the orphan's copy is gone with the orphan")
			}
			require.True(t, w.Kept())
			amp.Cast(c, w, tensor.BFloat16).Release() // cached
			w.Release()
			err := tensor.Try(func() { amp.Cast(c, w, tensor.BFloat16).Release() })
			assert.ErrorIs(t, err, tensor.ErrReleased, "a released weight")
		})
	})
	assert.Zero(t, c.BytesInUse())
}
