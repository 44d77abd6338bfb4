package amp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestCastCacheSeesInPlaceWrites: the region's cache of kept float32
// tensors must not hand out a copy made before the tensor was written in
// place. PyTorch's autocast caches only leaf tensors that require grad
// (parameters), so an input buffer refilled batch after batch inside one
// region is cast afresh at each use; strata caches every tensor that
// belongs to no context (kept tensors and orphans alike), so a kept (or
// orphan) input buffer refilled with CopyFrom inside one region was
// multiplied at its first batch's values at every later batch, in
// silence. The same holds for a weight an optimizer step updated inside
// the region (a training loop written inside one amp.Autocast). The
// tensors count their in-place writes (Version): a copy made at another
// version is stale.
func TestCastCacheSeesInPlaceWrites(t *testing.T) {
	buf, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleStaging, 1, 2)
	require.NoError(t, err)
	defer buf.Release()
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 2, 2)
	require.NoError(t, err)
	defer w.Release()
	w.Fill(1)
	bg := tensor.Background()
	bg.WithScope(func() {
		// A region of Background (nil: the default context), its input a
		// kept buffer refilled in place for each batch.
		amp.Autocast(nil, tensor.BFloat16, func() {
			var got [][]float32
			for _, batch := range [][]float32{{1, 2}, {3, 4}, {5, 6}} {
				buf.CopyFrom(tensor.FromFloat32s(tensor.CPU(), batch, 1, 2))
				y := autograd.MatMul(autograd.Const(buf), autograd.Const(w))
				got = append(got, y.Value.Float32s())
			}
			assert.Equal(t, [][]float32{{3, 3}, {7, 7}, {11, 11}}, got, "each batch's product")
		})
	})
	c := tensor.NewCtx()
	c.WithScope(func() {
		amp.Autocast(c, tensor.BFloat16, func() {
			x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 1, 1, 2))
			assert.Equal(t, []float32{2, 2}, autograd.MatMul(x, autograd.Const(w)).Value.Float32s())
			// A weight written in place (an optimizer's update) is cast
			// again, and then once while it stays unchanged.
			w.Fill(2)
			assert.Equal(t, []float32{4, 4}, autograd.MatMul(x, autograd.Const(w)).Value.Float32s(), "the product after the update")
			w1, w2 := amp.Cast(c, w, tensor.BFloat16), amp.Cast(c, w, tensor.BFloat16)
			assert.True(t, w1.SharesStorage(w2), "cast once while unchanged")
			assert.Equal(t, []float32{2, 2, 2, 2}, w1.Float32s())
		})
	})
	assert.Zero(t, c.BytesInUse())
}
