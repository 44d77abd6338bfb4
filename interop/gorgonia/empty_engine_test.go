package gorgonia_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/interop/gorgonia"
	"github.com/strata-ml/strata/memory"
)

// TestEmptyDenseWithEngine: a Dense of no elements made on an Engine (an
// empty batch), which panicked in Alloc(0), is made, converts with
// FromDense to a tensor of its shape, and is freed, with no leak.
func TestEmptyDenseWithEngine(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	e, err := gorgonia.NewEngine(m, memory.RoleActivation, nil)
	require.NoError(t, err)
	var d *gt.Dense
	require.NotPanics(t, func() { d = gt.New(gt.WithShape(0, 3), gt.Of(gt.Float32), gt.WithEngine(e)) })
	x, err := gorgonia.FromDense(cpu, d)
	require.NoError(t, err)
	require.Equal(t, []int{0, 3}, x.Shape())
	x.Release()
	require.NoError(t, e.Free(d, int64(d.MemSize())))
	require.NoError(t, m.Close())
}
