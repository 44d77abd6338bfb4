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

// The backward of such a row takes x - mean as the forward did (0), not
// x minus the row's uncorrected mean, an ulp off: with rstd ~316 that
// ulp of 1e30 made xhat ~4e16 and dx, dw came out ~1e36 where
// dx = rstd (g - mean(g)), dw = 0 and db = dy.
func TestLayerNormBackwardConstantRowsFloat64(t *testing.T) {
	for _, c := range []float64{1e30, -1e30, 3e29, -7.5e300} {
		for _, cols := range []int{1, 2, 3, 5, 7, 768} {
			x := make([]float64, cols)
			for i := range x {
				x[i] = c
			}
			r := newRNG(uint64(cols))
			w, dy := randSlice[float64](r, cols, 0.5, 1.5), randSlice[float64](r, cols, -1, 1)
			y, mean, rstd := make([]float64, cols), make([]float64, 1), make([]float64, 1)
			LayerNorm(y, mean, rstd, x, w, nil, 1, cols, 1e-5)
			dx, dw, db := make([]float64, cols), make([]float64, cols), make([]float64, cols)
			LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, 1, cols)
			var sg float64
			for i := range dy {
				sg += dy[i] * w[i]
			}
			wantDx := make([]float64, cols)
			for i := range wantDx {
				wantDx[i] = rstd[0] * (dy[i]*w[i] - sg/float64(cols))
			}
			requireClose(t, "dx", dx, wantDx, 1e-12, 1e-9)
			requireClose(t, "dw", dw, make([]float64, cols), 0, 1e-300)
			requireClose(t, "db", db, dy, 0, 1e-300)
		}
	}
}
