package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCausalMask(t *testing.T) {
	for _, c := range [][3]int{{1, 1, 1}, {2, 4, 4}, {3, 2, 5}, {1, 5, 3}, {16 * 4, 64, 64}, {2, 300, 300}} {
		batch, rows, cols := c[0], c[1], c[2]
		t.Run(shapeName(batch, rows, cols), func(t *testing.T) {
			src := randSlice[float32](newRNG(uint64(rows*cols)), batch*rows*cols, -1, 1)
			fill := float32(math.Inf(-1))
			want := make([]float64, len(src))
			for b := 0; b < batch; b++ {
				for i := 0; i < rows; i++ {
					for j := 0; j < cols; j++ {
						k := (b*rows+i)*cols + j
						want[k] = float64(src[k])
						if j > i+cols-rows {
							want[k] = math.Inf(-1)
						}
					}
				}
			}
			dst := make([]float32, len(src))
			CausalMask(dst, src, batch, rows, cols, fill)
			requireClose(t, "mask", dst, want, 0, 0)
			CausalMask(src, src, batch, rows, cols, fill) // in place
			require.Equal(t, dst, src)
			// Backward: the same call with fill 0 zeroes the masked gradient.
			dy := randSlice[float32](newRNG(9), len(src), -1, 1)
			dx := make([]float32, len(src))
			CausalMask(dx, dy, batch, rows, cols, 0)
			for k := range dx {
				if math.IsInf(want[k], -1) {
					require.Zero(t, dx[k])
				} else {
					require.Equal(t, dy[k], dx[k])
				}
			}
		})
	}
	require.Panics(t, func() { CausalMask(make([]float32, 3), make([]float32, 4), 1, 2, 2, 0) })
}
