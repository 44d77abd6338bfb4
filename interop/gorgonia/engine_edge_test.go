package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/memory"
)

// Memset of a Dense of no elements, the Engine's or in Go memory, has
// nothing to set: it succeeds on a host engine (it was refused as device
// memory without a CUDA context), as Memclr and Memcpy do.
func TestEngineMemsetNoElements(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	own := gt.New(gt.WithShape(0, 3), gt.Of(gt.Float32), gt.WithEngine(e))
	goMem := gt.New(gt.WithShape(0, 3), gt.Of(gt.Float32))
	for name, d := range map[string]*gt.Dense{"engine's": own, "Go memory": goMem} {
		require.NoError(t, e.Memset(d, float32(1)), name)
		require.NotPanics(t, func() { e.Memclr(d) }, name)
		require.NoError(t, e.Memcpy(d, goMem), name)
	}
	free(t, e, own)
	require.NoError(t, m.Close())
}

// A scalar Dense in Go memory is a gorgonia tensor's Go memory like any
// other: Memset, Memclr, Memcpy and Accessible take it (they refused it,
// its Data being a number, not a slice).
func TestEngineGoScalarDense(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	sc := gt.New(gt.FromScalar(float32(3)))
	require.NoError(t, e.Memset(sc, float32(1.5)))
	assert.Equal(t, float32(1.5), sc.Data())

	one := gt.New(gt.WithShape(1), gt.Of(gt.Float32), gt.WithEngine(e))
	require.NoError(t, e.Memcpy(one, sc))
	assert.Equal(t, []float32{1.5}, one.Data())
	require.NoError(t, one.Memset(float32(-2)))
	require.NoError(t, e.Memcpy(sc, one))
	assert.Equal(t, float32(-2), sc.Data())

	got, err := e.Accessible(sc)
	require.NoError(t, err)
	assert.Same(t, sc, got)
	e.Memclr(sc)
	assert.Equal(t, float32(0), sc.Data())
	free(t, e, one)
	require.NoError(t, m.Close())
}

// A zero-value Dense (&gt.Dense{}: no element type, no elements) has
// nothing to set, as Memclr, Memcpy and Accessible find: Memset succeeds.
// It returned an error whose text held "%!v(PANIC=Format method: ...)",
// from formatting the Dense's missing element type.
func TestEngineMemsetZeroValueDense(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	z := &gt.Dense{}
	require.NoError(t, e.Memset(z, float32(1)))
	require.NotPanics(t, func() { e.Memclr(z) })
	require.NoError(t, e.Memcpy(z, z))
	require.NoError(t, m.Close())
}

// Memclr of a view that skips elements (a column of a matrix) zeroes the
// view's elements and no others, in Go memory and in the Engine's: it
// zeroed every element from the view's first to its last (gorgonia's
// Dense.Zero clears that whole stretch of storage after the view's own).
func TestEngineMemclrColumnView(t *testing.T) {
	e, m := hostEngine(t, memory.RoleActivation)
	own := gt.New(gt.WithShape(4, 3), gt.Of(gt.Float32), gt.WithEngine(e))
	goMem := gt.New(gt.WithShape(4, 3), gt.Of(gt.Float32))
	for name, d := range map[string]*gt.Dense{"engine's": own, "Go memory": goMem} {
		for i := range 12 {
			d.Set(i, float32(i+1))
		}
		col, err := d.Slice(nil, gt.S(1))
		require.NoError(t, err, name)
		e.Memclr(col.(*gt.Dense))
		assert.Equal(t, []float32{1, 0, 3, 4, 0, 6, 7, 0, 9, 10, 0, 12}, d.Data(), name)

		require.NoError(t, d.T()) // a transposed Dense clears all of itself
		e.Memclr(d)
		assert.Equal(t, make([]float32, 12), d.Data(), name)
	}
	free(t, e, own)
	require.NoError(t, m.Close())
}
