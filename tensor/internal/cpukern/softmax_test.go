package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func softmaxRef[T Float](x []T, rows, cols int) (sm, lsm []float64) {
	sm, lsm = make([]float64, rows*cols), make([]float64, rows*cols)
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, float64(v))
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v) - m)
		}
		for i, v := range row {
			sm[r*cols+i] = math.Exp(float64(v)-m) / s
			lsm[r*cols+i] = float64(v) - m - math.Log(s)
		}
	}
	return sm, lsm
}

func TestSoftmaxMatchesReference(t *testing.T) {
	testSoftmax[float32](t)
	testSoftmax[float64](t)
}

func testSoftmax[T Float](t *testing.T) {
	for si, sh := range rowShapes {
		rows, cols := sh[0], sh[1]
		t.Run(shapeName(rows, cols)+"/"+dtypeName[T](), func(t *testing.T) {
			r := newRNG(uint64(si))
			x := randSlice[T](r, rows*cols, -8, 8)
			sm, lsm := softmaxRef(x, rows, cols)
			y := make([]T, rows*cols)
			Softmax(y, x, rows, cols)
			// float32: x - max rounds to 0.5 ulp of |x - max| <= 16, which
			// exp turns into a relative error up to 16 * 6e-8 (as in any
			// float32 softmax), plus a few ulp for exp and the scaling.
			requireClose(t, "softmax", y, sm, tol[T](1.3e-6, 1e-14), 1e-30)
			ly := make([]T, rows*cols)
			LogSoftmax(ly, x, rows, cols)
			// log-softmax values are O(10): absolute error matters.
			requireClose(t, "logsoftmax", ly, lsm, tol[T](2e-7, 1e-14), tol[T](1e-6, 1e-13))

			// Backward against the closed forms, in float64.
			dy := randSlice[T](r, rows*cols, -1, 1)
			wantS, wantL := make([]float64, rows*cols), make([]float64, rows*cols)
			for row := 0; row < rows; row++ {
				dotv, sumv := 0.0, 0.0
				for i := row * cols; i < (row+1)*cols; i++ {
					dotv += float64(dy[i]) * float64(y[i])
					sumv += float64(dy[i])
				}
				for i := row * cols; i < (row+1)*cols; i++ {
					wantS[i] = float64(y[i]) * (float64(dy[i]) - dotv)
					wantL[i] = float64(dy[i]) - math.Exp(float64(ly[i]))*sumv
				}
			}
			dx := make([]T, rows*cols)
			SoftmaxBackward(dx, y, dy, rows, cols)
			requireClose(t, "softmax dx", dx, wantS, tol[T](1e-6, 1e-12), tol[T](1e-7, 1e-14))
			LogSoftmaxBackward(dx, ly, dy, rows, cols)
			requireClose(t, "logsoftmax dx", dx, wantL, tol[T](1e-6, 1e-12), tol[T](1e-6, 1e-13))

			// In place.
			Softmax(x, x, rows, cols)
			require.Equal(t, y, x)
			SoftmaxBackward(dy, y, dy, rows, cols)
			SoftmaxBackward(dx, y, dy, rows, cols) // dy now holds dx: just must not panic
		})
	}
}

// TestSoftmaxBackwardFiniteDifference checks both backward kernels against
// central differences of the forward kernels (float64).
func TestSoftmaxBackwardFiniteDifference(t *testing.T) {
	const rows, cols, h = 3, 7, 1e-6
	r := newRNG(3)
	x := randSlice[float64](r, rows*cols, -3, 3)
	dy := randSlice[float64](r, rows*cols, -1, 1)
	for _, fwd := range []struct {
		name string
		f    func(dst, src []float64, rows, cols int)
		b    func(dx, y, dy []float64, rows, cols int)
	}{
		{"softmax", Softmax[float64], SoftmaxBackward[float64]},
		{"logsoftmax", LogSoftmax[float64], LogSoftmaxBackward[float64]},
	} {
		y := make([]float64, rows*cols)
		fwd.f(y, x, rows, cols)
		dx := make([]float64, rows*cols)
		fwd.b(dx, y, dy, rows, cols)
		loss := func(x []float64) float64 {
			out := make([]float64, len(x))
			fwd.f(out, x, rows, cols)
			return dot(out, dy)
		}
		for i := range x {
			xp := append([]float64(nil), x...)
			xm := append([]float64(nil), x...)
			xp[i] += h
			xm[i] -= h
			fd := (loss(xp) - loss(xm)) / (2 * h)
			require.InDelta(t, fd, dx[i], 1e-8, "%s dx[%d]", fwd.name, i)
		}
	}
}

func TestSoftmaxSpecialRows(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		row  []float32
		want []float64
	}{
		{"masked", []float32{1, float32(-inf), float32(-inf)}, []float64{1, 0, 0}},
		{"huge", []float32{1e30, 0, -1e30}, []float64{1, 0, 0}},
		{"all -inf", []float32{float32(-inf), float32(-inf)}, []float64{math.NaN(), math.NaN()}},
		{"+inf", []float32{float32(inf), 1}, []float64{math.NaN(), math.NaN()}},
		{"nan", []float32{float32(math.NaN()), 1}, []float64{math.NaN(), math.NaN()}},
	} {
		y := make([]float32, len(tc.row))
		Softmax(y, tc.row, 1, len(tc.row))
		requireClose(t, tc.name, y, tc.want, 1e-7, 0)
	}
	// Log-softmax of a row with -inf entries gives -inf there.
	y := make([]float32, 3)
	LogSoftmax(y, []float32{0, 0, float32(-inf)}, 1, 3)
	requireClose(t, "logsoftmax masked", y, []float64{-math.Ln2, -math.Ln2, -inf}, 1e-7, 0)
}

func TestSoftmaxPanics(t *testing.T) {
	assert.PanicsWithValue(t, "cpukern.Softmax: argument 2 has 5 elements, want rows*cols = 2*3", func() {
		Softmax(make([]float32, 6), make([]float32, 5), 2, 3)
	})
}
