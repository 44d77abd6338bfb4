package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// causalSoftmaxRef is the float64 softmax of each row over the positions
// CausalMask keeps, zero elsewhere, and its backward for dy.
func causalSoftmaxRef[T Float](x, dy []T, batch, rows, cols int) (y, dx []float64) {
	y, dx = make([]float64, len(x)), make([]float64, len(x))
	for r := 0; r < batch*rows; r++ {
		keep := r%rows + 1 + cols - rows
		o := r * cols
		m := math.Inf(-1)
		for _, v := range x[o : o+keep] {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range x[o : o+keep] {
			s += math.Exp(float64(v) - m)
		}
		d := 0.0
		for j := range keep {
			y[o+j] = math.Exp(float64(x[o+j])-m) / s
			d += y[o+j] * float64(dy[o+j])
		}
		for j := range keep {
			dx[o+j] = y[o+j] * (float64(dy[o+j]) - d)
		}
	}
	return y, dx
}

func TestCausalSoftmax(t *testing.T) {
	testCausalSoftmax[float32](t)
	testCausalSoftmax[float64](t)
}

func testCausalSoftmax[T Float](t *testing.T) {
	for _, c := range [][3]int{{1, 1, 1}, {2, 4, 4}, {3, 2, 5}, {1, 1, 7}, {8 * 4, 64, 64}, {2, 300, 300}, {1, 3, 2000}} {
		batch, rows, cols := c[0], c[1], c[2]
		t.Run(shapeName(batch, rows, cols)+"/"+dtypeName[T](), func(t *testing.T) {
			r := newRNG(uint64(batch*rows*cols + 1))
			x := randSlice[T](r, batch*rows*cols, -8, 8)
			dy := randSlice[T](r, len(x), -1, 1)
			wantY, wantDx := causalSoftmaxRef(x, dy, batch, rows, cols)
			y := make([]T, len(x))
			for i := range y {
				y[i] = T(math.NaN()) // every element must be written
			}
			CausalSoftmax(y, x, batch, rows, cols)
			requireClose(t, "y", y, wantY, tol[T](1.3e-6, 1e-14), 1e-30)
			dx := make([]T, len(x))
			for i := range dx {
				dx[i] = T(math.NaN())
			}
			CausalSoftmaxBackward(dx, y, dy, batch, rows, cols)
			requireClose(t, "dx", dx, wantDx, tol[T](1e-6, 1e-12), tol[T](1e-7, 1e-14))

			// The same as masking then normalising, the unfused chain.
			masked, chain := make([]T, len(x)), make([]T, len(x))
			CausalMask(masked, x, batch, rows, cols, T(math.Inf(-1)))
			Softmax(chain, masked, batch*rows, cols)
			requireClose(t, "vs mask+softmax", y, toF64(chain), tol[T](1e-6, 1e-14), 1e-30)

			// In place, and the masked inputs are never read.
			for r := 0; r < batch*rows; r++ {
				for j := r%rows + 1 + cols - rows; j < cols; j++ {
					x[r*cols+j] = T(math.NaN())
				}
			}
			CausalSoftmax(x, x, batch, rows, cols)
			require.Equal(t, y, x)
			CausalSoftmaxBackward(dy, y, dy, batch, rows, cols)
			require.Equal(t, dx, dy)
		})
	}
}

func TestCausalSoftmaxPanics(t *testing.T) {
	f := make([]float32, 12)
	require.PanicsWithValue(t, "cpukern.CausalSoftmax: 4 query rows over 3 key columns: the first rows would keep nothing",
		func() { CausalSoftmax(f, f, 1, 4, 3) })
	require.Panics(t, func() { CausalSoftmax(f, f, 1, 3, 3) }, "wrong length")
	require.Panics(t, func() { CausalSoftmaxBackward(f, f, f[:6], 1, 3, 4) }, "wrong length")
	require.Panics(t, func() { CausalSoftmax(f, f, -1, 3, 4) }, "negative")
	CausalSoftmax(f[:0], f[:0], 0, 3, 4) // empty: nothing to do
}

func toF64[T Float](x []T) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
