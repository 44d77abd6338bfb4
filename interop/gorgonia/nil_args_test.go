package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/memory"
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

// A nil *gt.Dense is nil memory, as a nil gt.Memory is: Free, Memset,
// Memcpy and Accessible return an invalid-argument error, and Memclr
// panics with it (each dereferenced the nil Dense: a nil pointer panic).
func TestEngineNilDense(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	defer m.Close()
	var d *gt.Dense
	ok := gt.New(gt.WithShape(2), gt.Of(gt.Float32))
	_, accErr := e.Accessible(d)
	for name, err := range map[string]error{
		"Free":       e.Free(d, 0),
		"Memset":     e.Memset(d, float32(1)),
		"Memcpy dst": e.Memcpy(d, ok),
		"Memcpy src": e.Memcpy(ok, d),
		"Accessible": accErr,
	} {
		assert.ErrorIs(t, err, memory.ErrInvalidArgument, name)
		assert.ErrorContains(t, err, "nil memory", name)
	}
	defer func() {
		err, _ := recover().(error)
		assert.ErrorIs(t, err, memory.ErrInvalidArgument, "Memclr")
	}()
	e.Memclr(d)
}
