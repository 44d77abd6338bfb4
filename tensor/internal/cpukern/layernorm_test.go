package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lnEps = 1e-5

// layerNormRef is the textbook two-pass float64 layer norm.
func layerNormRef[T Float](x, w, b []T, rows, cols int) (y, mean, rstd []float64) {
	y, mean, rstd = make([]float64, rows*cols), make([]float64, rows), make([]float64, rows)
	for r := 0; r < rows; r++ {
		row := x[r*cols : (r+1)*cols]
		m := 0.0
		for _, v := range row {
			m += float64(v)
		}
		m /= float64(cols)
		v := 0.0
		for _, e := range row {
			v += (float64(e) - m) * (float64(e) - m)
		}
		v /= float64(cols)
		rs := 1 / math.Sqrt(v+lnEps)
		mean[r], rstd[r] = m, rs
		for i, e := range row {
			o := (float64(e) - m) * rs
			if w != nil {
				o *= float64(w[i])
			}
			if b != nil {
				o += float64(b[i])
			}
			y[r*cols+i] = o
		}
	}
	return y, mean, rstd
}

func TestLayerNormMatchesReference(t *testing.T) {
	testLayerNorm[float32](t)
	testLayerNorm[float64](t)
}

func testLayerNorm[T Float](t *testing.T) {
	for si, sh := range rowShapes {
		rows, cols := sh[0], sh[1]
		for _, affine := range []string{"wb", "w", "b", "none"} {
			t.Run(shapeName(rows, cols)+"/"+affine+"/"+dtypeName[T](), func(t *testing.T) {
				r := newRNG(uint64(si))
				// An offset mean checks the two-pass variance.
				x := randSlice[T](r, rows*cols, 2, 6)
				var w, b []T
				if affine == "wb" || affine == "w" {
					w = randSlice[T](r, cols, 0.5, 1.5)
				}
				if affine == "wb" || affine == "b" {
					b = randSlice[T](r, cols, -1, 1)
				}
				wantY, wantM, wantR := layerNormRef(x, w, b, rows, cols)
				y, mean, rstd := make([]T, rows*cols), make([]T, rows), make([]T, rows)
				LayerNorm(y, mean, rstd, x, w, b, rows, cols, lnEps)
				requireClose(t, "mean", mean, wantM, tol[T](1e-7, 1e-14), 0)
				requireClose(t, "rstd", rstd, wantR, tol[T](1e-7, 1e-13), 0)
				// y is O(1); float32 uses the float32-rounded mean and rstd.
				requireClose(t, "y", y, wantY, tol[T](1e-6, 1e-12), tol[T](1e-6, 1e-12))

				// Backward, against closed forms in float64.
				dy := randSlice[T](r, rows*cols, -1, 1)
				wantDx := make([]float64, rows*cols)
				wantDw, wantDb := make([]float64, cols), make([]float64, cols)
				for row := 0; row < rows; row++ {
					// The row's exact mean (the kernel subtracts its
					// rounding and the rest) and the rounded rstd.
					m, rs := wantM[row], float64(rstd[row])
					var sg, sgx float64
					for i := 0; i < cols; i++ {
						k := row*cols + i
						xh := (float64(x[k]) - m) * rs
						g := float64(dy[k])
						wantDw[i] += g * xh
						wantDb[i] += g
						if w != nil {
							g *= float64(w[i])
						}
						sg += g
						sgx += g * xh
					}
					for i := 0; i < cols; i++ {
						k := row*cols + i
						xh := (float64(x[k]) - m) * rs
						g := float64(dy[k])
						if w != nil {
							g *= float64(w[i])
						}
						wantDx[k] = rs * (g - sg/float64(cols) - xh*sgx/float64(cols))
					}
				}
				dx := make([]T, rows*cols)
				dw := randSlice[T](r, cols, -1, 1) // accumulated into
				db := randSlice[T](r, cols, -1, 1)
				for i := range wantDw {
					wantDw[i] += float64(dw[i])
					wantDb[i] += float64(db[i])
				}
				LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols)
				requireClose(t, "dx", dx, wantDx, tol[T](2e-6, 1e-11), tol[T](2e-6, 1e-11))
				requireClose(t, "dw", dw, wantDw, tol[T](1e-6, 1e-12), tol[T](1e-6, 1e-12))
				requireClose(t, "db", db, wantDb, tol[T](1e-6, 1e-12), tol[T](1e-6, 1e-12))
				// No dw/db wanted: same dx.
				dx2 := make([]T, rows*cols)
				LayerNormBackward(dx2, nil, nil, dy, x, mean, rstd, w, rows, cols)
				require.Equal(t, dx, dx2)
			})
		}
	}
}

// TestLayerNormBackwardFiniteDifference differentiates L = sum(y * dy)
// numerically with respect to x, w and b (float64).
func TestLayerNormBackwardFiniteDifference(t *testing.T) {
	const rows, cols, h = 3, 6, 1e-6
	r := newRNG(11)
	x := randSlice[float64](r, rows*cols, -2, 2)
	w := randSlice[float64](r, cols, 0.5, 1.5)
	b := randSlice[float64](r, cols, -1, 1)
	dy := randSlice[float64](r, rows*cols, -1, 1)
	loss := func(x, w, b []float64) float64 {
		y, m, s := make([]float64, rows*cols), make([]float64, rows), make([]float64, rows)
		LayerNorm(y, m, s, x, w, b, rows, cols, lnEps)
		return dot(y, dy)
	}
	y, mean, rstd := make([]float64, rows*cols), make([]float64, rows), make([]float64, rows)
	LayerNorm(y, mean, rstd, x, w, b, rows, cols, lnEps)
	dx, dw, db := make([]float64, rows*cols), make([]float64, cols), make([]float64, cols)
	LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, rows, cols)
	for _, p := range []struct {
		name string
		v    []float64
		grad []float64
	}{{"x", x, dx}, {"w", w, dw}, {"b", b, db}} {
		for i := range p.v {
			old := p.v[i]
			p.v[i] = old + h
			lp := loss(x, w, b)
			p.v[i] = old - h
			lm := loss(x, w, b)
			p.v[i] = old
			require.InDelta(t, (lp-lm)/(2*h), p.grad[i], 1e-7, "d%s[%d]", p.name, i)
		}
	}
}

func TestLayerNormPanics(t *testing.T) {
	x := make([]float32, 6)
	assert.PanicsWithValue(t, "cpukern.LayerNorm: w has 2 elements, want 3", func() {
		LayerNorm(x, make([]float32, 2), make([]float32, 2), x, make([]float32, 2), nil, 2, 3, 1e-5)
	})
	assert.PanicsWithValue(t, "cpukern.LayerNormBackward: mean has 1 elements, want 2", func() {
		LayerNormBackward(x, nil, nil, x, x, make([]float32, 1), make([]float32, 2), nil, 2, 3)
	})
}

// TestLayerNormLargeMean: rows whose mean is large against their spread
// (10000 + 0.001k) keep the mean's rounding error out of the outputs and
// the gradients: the float32 kernel against the float64 reference of the
// same float32 inputs, where subtracting the float32-rounded mean was off
// by 0.146 in every output (PyTorch's float32 kernel is off as much).
func TestLayerNormLargeMean(t *testing.T) {
	const rows, cols = 3, 4
	x := make([]float32, rows*cols)
	for r := range rows {
		for i := range cols {
			x[r*cols+i] = float32(10000*(r+1)) + 0.001*float32(i) + 0.0003*float32(r)
		}
	}
	w := []float32{1, 0.5, -2, 1.5}
	b := []float32{0.1, -0.2, 0.3, 0}
	wantY, wantM, wantR := layerNormRef(x, w, b, rows, cols)
	y, mean, rstd := make([]float32, rows*cols), make([]float32, rows), make([]float32, rows)
	LayerNorm(y, mean, rstd, x, w, b, rows, cols, lnEps)
	requireClose(t, "mean", mean, wantM, 1e-7, 0)
	// rstd is ~1000 here: its float32 rounding is relative; y is O(1).
	requireClose(t, "y", y, wantY, 1e-3, 1e-3)

	dy := []float32{0.3, -1, 0.25, 0.7, -0.4, 0.9, 0.1, -0.6, 1, 0.2, -0.3, 0.5}
	wantDx := make([]float64, rows*cols)
	for r := range rows {
		m, rs := wantM[r], wantR[r]
		var sg, sgx float64
		for i := range cols {
			k := r*cols + i
			g := float64(dy[k]) * float64(w[i])
			sg += g
			sgx += g * (float64(x[k]) - m) * rs
		}
		for i := range cols {
			k := r*cols + i
			g := float64(dy[k]) * float64(w[i])
			wantDx[k] = rs * (g - sg/cols - (float64(x[k])-m)*rs*sgx/cols)
		}
	}
	dx := make([]float32, rows*cols)
	LayerNormBackward(dx, nil, nil, dy, x, mean, rstd, w, rows, cols)
	// dx is ~rstd = ~1000 in size: 1e-3 relative.
	requireClose(t, "dx", dx, wantDx, 1e-3, 0)
}
