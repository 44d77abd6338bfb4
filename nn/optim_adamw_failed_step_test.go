package nn_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestAdamWFailedStepCountsWhatItUpdated: a step over parameters at
// different counts is one launch per count; when a later launch fails (b's
// gradient has the wrong shape), the parameters an earlier one updated
// and Steps count that update, so their bias correction stays that of
// the updates they had (a retried step does not reuse the count).
func TestAdamWFailedStepCountsWhatItUpdated(t *testing.T) {
	tensor.WithScope(func() {
		a, b, _, opt := twoParams(t)
		pa := a.Value.Float64s()
		var ra adamRef
		update := func(g []float64) { ra.update(pa, g, 0.1, 0.9, 0.999, 1e-8, 0.1) }
		g := [][]float64{{0.1, -0.2, 0.3, 1e-3}, {-0.5, 0.7, 0.01, 2}, {0.3, 0.3, -0.3, 0.1}}

		setGrad(a, g[0])
		require.NoError(t, opt.Step()) // a: 1 update, b: none
		update(g[0])

		setGrad(a, g[1])
		bad := tensor.FromFloat64s(tensor.CPU(), g[1], 4)
		tensor.Keep(bad)
		b.Grad = bad
		require.ErrorIs(t, opt.Step(), tensor.ErrShape, "b's launch fails after a's")
		require.False(t, slices.Equal(pa, a.Value.Float64s()), "a had its second update")
		update(g[1])
		require.Equal(t, 2, opt.Steps(), "the step is taken for a")

		setGrad(a, g[2])
		setGrad(b, g[2])
		require.NoError(t, opt.Step())
		update(g[2])
		require.InDeltaSlice(t, pa, a.Value.Float64s(), 1e-12, "a is bias-corrected by the updates it had")
	})
}
