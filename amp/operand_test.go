package amp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

func TestOperandCastsAndCachesWeights(t *testing.T) {
	mem := tensor.CPU().Memory()
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 4, 3)
	require.NoError(t, err)
	w.Fill(1.5)
	defer w.Release()
	base := mem.InUse()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := c.Full(tensor.CPU(), tensor.Float32, 0.25, 2, 4)
		o, mode := amp.Operand(c, x)
		assert.Equal(t, tensor.Float32, o.DType(), "outside a region: as it is")
		assert.False(t, mode.Float32Out)
		assert.True(t, o.SharesStorage(x))

		amp.Autocast(c, tensor.BFloat16, func() {
			assert.Equal(t, amp.State{Enabled: true, DType: tensor.BFloat16}, amp.Current(c))
			w1, mode := amp.Operand(c, w)
			w2, _ := amp.Operand(c, w)
			assert.True(t, mode.Float32Out)
			assert.Equal(t, tensor.BFloat16, w1.DType())
			assert.True(t, w1.SharesStorage(w2), "a weight is cast once per region")
			x1, _ := amp.Operand(c, x)
			x2, _ := amp.Operand(c, x)
			assert.False(t, x1.SharesStorage(x2), "activations are cast at each use")
			assert.Equal(t, []float32{0.25, 0.25}, x1.Float32s()[:2])
			amp.With(c, amp.State{}, func() { // a nested region with autocast off
				o, _ := amp.Operand(c, w)
				assert.Equal(t, tensor.Float32, o.DType())
			})
			assert.True(t, amp.Current(c).Enabled, "restored after the nested region")
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
