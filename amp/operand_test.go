package amp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

func TestCastCachesWeightsPerRegion(t *testing.T) {
	mem := tensor.CPU().Memory()
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 4, 3)
	require.NoError(t, err)
	w.Fill(1.5)
	defer w.Release()
	base := mem.InUse()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := c.Full(tensor.CPU(), tensor.Float32, 0.25, 2, 4)
		o := amp.Cast(c, x, tensor.Float32)
		assert.Equal(t, tensor.Float32, o.DType(), "already in the dtype: as it is")
		assert.True(t, o.SharesStorage(x))
		o1, o2 := amp.Cast(c, w, tensor.BFloat16), amp.Cast(c, w, tensor.BFloat16)
		assert.False(t, o1.SharesStorage(o2), "outside a region a weight is cast at each use")

		amp.Autocast(c, tensor.BFloat16, func() {
			assert.Equal(t, amp.State{Enabled: true, DType: tensor.BFloat16}, amp.Current(c))
			w1, w2 := amp.Cast(c, w, tensor.BFloat16), amp.Cast(c, w, tensor.BFloat16)
			assert.Equal(t, tensor.BFloat16, w1.DType())
			assert.True(t, w1.SharesStorage(w2), "a weight is cast once per region")
			x1, x2 := amp.Cast(c, x, tensor.BFloat16), amp.Cast(c, x, tensor.BFloat16)
			assert.False(t, x1.SharesStorage(x2), "activations are cast at each use")
			assert.Equal(t, []float32{0.25, 0.25}, x1.Float32s()[:2])
			amp.With(c, amp.State{}, func() { // a nested region with autocast off
				assert.False(t, amp.Cast(c, w, tensor.BFloat16).SharesStorage(w1), "the off region has no cache")
			})
			assert.True(t, amp.Current(c).Enabled, "restored after the nested region")
			assert.True(t, amp.Cast(c, w, tensor.BFloat16).SharesStorage(w1), "and its cache with it")
		})
		assert.Equal(t, amp.State{}, amp.Current(c))
	})
	assert.Equal(t, base, mem.InUse(), "the region's weight copies are freed")
	assert.Zero(t, c.BytesInUse())
}

func TestAutocastRejectsOtherDTypes(t *testing.T) {
	err := tensor.Try(func() { amp.Autocast(tensor.NewCtx(), tensor.Float64, func() {}) })
	require.ErrorIs(t, err, tensor.ErrDType)
}

func TestAutocastStateIsPerContext(t *testing.T) {
	c1, c2 := tensor.NewCtx(), tensor.NewCtx()
	amp.Autocast(c1, tensor.Float16, func() {
		assert.True(t, amp.Current(c1).Enabled)
		assert.False(t, amp.Current(c2).Enabled)
		assert.False(t, amp.Current(nil).Enabled, "Background untouched")
	})
}
