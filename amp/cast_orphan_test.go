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

// TestCastCacheDropsReleasedTensors: a kept tensor released inside a
// region kept its copy in the cache until the region closed, so a loop
// inside one region that made and freed a kept float32 tensor at each
// step (a new input buffer for each batch) held one more copy a step.
// The copies of released tensors are now dropped as the cache grows: a
// bounded number of them is left whatever the number of steps.
func TestCastCacheDropsReleasedTensors(t *testing.T) {
	mem := tensor.CPU().Memory()
	base := mem.InUse()
	c := tensor.NewCtx()
	c.WithScope(func() {
		amp.Autocast(c, tensor.BFloat16, func() {
			for range 200 {
				x, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleStaging, 64, 64)
				require.NoError(t, err)
				x.Fill(1)
				amp.Cast(c, x, tensor.BFloat16).Release()
				x.Release()
			}
			copyBytes := int64(64 * 64 * 2)
			assert.Less(t, mem.InUse()-base, 40*copyBytes, "copies of released tensors held after 200 steps")
		})
	})
	assert.Equal(t, base, mem.InUse())
	assert.Zero(t, c.BytesInUse())
}
