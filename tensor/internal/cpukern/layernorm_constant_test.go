package cpukern

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A float64 row of one value normalises to exactly 0 (its deviations are
// 0), its mean that value: the sum of a row of 1e30 rounds, its mean was
// an ulp off, and y was ±1 (PyTorch 1.13's float64 layer_norm gives
// 3.4e15 there: its y = x*rstd - mean*rstd cancels). Lengths cover the
// pairs loop and its tail.
func TestLayerNormConstantRowsFloat64(t *testing.T) {
	for _, c := range []float64{1e30, -1e30, 3e29, -7.5e300, 1e-300} {
		for _, cols := range []int{1, 2, 3, 5, 7, 768} {
			x := make([]float64, cols)
			for i := range x {
				x[i] = c
			}
			y, mean, rstd := make([]float64, cols), make([]float64, 1), make([]float64, 1)
			LayerNorm(y, mean, rstd, x, nil, nil, 1, cols, 1e-5)
			require.Equal(t, make([]float64, cols), y, "%g x %d", c, cols)
			require.Equal(t, c, mean[0], "%g x %d", c, cols)
		}
	}
}
