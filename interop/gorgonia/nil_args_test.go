package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/tensor"
)

// A nil Ctx means tensor.Background(), as elsewhere in strata: the tensor
// is the one FromDense makes.
func TestFromDenseNilCtx(t *testing.T) {
	d := gt.New(gt.WithShape(2, 2), gt.WithBacking([]float32{1, 2, 3, 4}))
	x, err := gorgonia.FromDenseCtx(nil, cpu, d)
	require.NoError(t, err)
	defer x.Release()
	assert.Equal(t, []int{2, 2}, x.Shape())
	assert.Equal(t, []float32{1, 2, 3, 4}, x.Float32s())
}

// A zero-value Dense is an argument error that says so (formatting its
// dtype panicked inside the message: "%!v(PANIC=Format method: ..."), and
// a Dense of no elements is not "masked": it converts to a tensor of no
// elements.
func TestFromDenseEmpty(t *testing.T) {
	_, err := gorgonia.FromDense(cpu, &gt.Dense{})
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.EqualError(t, err, "gorgonia: FromDense of an empty (zero-value) Dense: invalid argument")
	assert.NotContains(t, err.Error(), "PANIC")
	for _, shape := range [][]int{{0}, {2, 0}, {0, 3}} {
		d := gt.New(gt.WithShape(shape...), gt.Of(gt.Float32))
		x, err := gorgonia.FromDense(cpu, d)
		require.NoError(t, err, "%v", shape)
		assert.Equal(t, shape, x.Shape())
		assert.Equal(t, tensor.Float32, x.DType())
		x.Release()
	}
}
