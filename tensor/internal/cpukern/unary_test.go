package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// unaryCase is one op with its float64 reference, its derivative, the
// input range to test it on, and its float32 tolerance.
type unaryCase struct {
	op     ops.UnaryOp
	ref    func(float64) float64
	deriv  func(float64) float64
	lo, hi float64
	rtol32 float64
}

var unaryCases = []unaryCase{
	{ops.Neg, func(x float64) float64 { return -x }, func(float64) float64 { return -1 }, -5, 5, 0},
	{ops.Exp, math.Exp, math.Exp, -20, 20, 2.5e-7},
	{ops.Log, math.Log, func(x float64) float64 { return 1 / x }, 1e-3, 100, 1e-7},
	{ops.Sqrt, math.Sqrt, func(x float64) float64 { return 0.5 / math.Sqrt(x) }, 1e-3, 100, 1e-7},
	{ops.Rsqrt, func(x float64) float64 { return 1 / math.Sqrt(x) }, func(x float64) float64 { return -0.5 * math.Pow(x, -1.5) }, 1e-3, 100, 2e-7},
	{ops.Tanh, math.Tanh, func(x float64) float64 { t := math.Tanh(x); return 1 - t*t }, -6, 6, 3e-7},
	// float32 GELU: the exp argument's float32 rounding is amplified by
	// |2u| <= 11 on [-4, 4] (see TestSigmoidGelu32Accuracy). The reference
	// is the sigmoid form, which TestGeluFormsAgree ties to the tanh form.
	{ops.Gelu, func(x float64) float64 { return x * geluSig(x) }, geluGradRef, -4, 4, 3e-6},
	{ops.Relu, func(x float64) float64 { return math.Max(x, 0) }, func(x float64) float64 {
		if x > 0 {
			return 1
		}
		return 0
	}, -5, 5, 0},
	{ops.Abs, math.Abs, func(x float64) float64 { return math.Copysign(1, x) }, -5, 5, 0},
	{ops.Square, func(x float64) float64 { return x * x }, func(x float64) float64 { return 2 * x }, -5, 5, 1e-7},
	{ops.Recip, func(x float64) float64 { return 1 / x }, func(x float64) float64 { return -1 / (x * x) }, 0.05, 20, 1e-7},
	{ops.Sigmoid, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, func(x float64) float64 {
		s := 1 / (1 + math.Exp(-x))
		return s * (1 - s)
	}, -20, 20, 2.5e-7},
	{ops.Silu, func(x float64) float64 { return x / (1 + math.Exp(-x)) }, func(x float64) float64 {
		s := 1 / (1 + math.Exp(-x))
		return s * (1 + x*(1-s))
	}, -20, 20, 2.5e-7},
}

var unarySizes = []int{0, 1, 3, 17, 256, 257, 1000, 20001, 140001}

func TestUnaryMatchesReference(t *testing.T) {
	testUnary[float32](t)
	testUnary[float64](t)
}

func testUnary[T Float](t *testing.T) {
	for ci, c := range unaryCases {
		for _, n := range unarySizes {
			t.Run(c.op.String()+"/"+dtypeName[T]()+"/"+shapeName(n), func(t *testing.T) {
				r := newRNG(uint64(100*ci + n))
				src := randSlice[T](r, n, c.lo, c.hi)
				want := make([]float64, n)
				for i, v := range src {
					want[i] = c.ref(float64(v))
				}
				dst := make([]T, n)
				Unary(c.op, dst, src)
				requireClose(t, "dst", dst, want, tol[T](c.rtol32, 1e-14), 1e-300)
				// In place.
				Unary(c.op, src, src)
				require.Equal(t, dst, src, "in-place result differs")
			})
		}
	}
}

func TestUnarySpecialValues(t *testing.T) {
	testUnarySpecial[float32](t)
	testUnarySpecial[float64](t)
}

func testUnarySpecial[T Float](t *testing.T) {
	inf := math.Inf(1)
	xs := []float64{math.NaN(), inf, -inf, 0, math.Copysign(0, -1), 1e-30, -1e-30, 300, -300}
	for _, c := range unaryCases {
		src := make([]T, len(xs))
		for i, x := range xs {
			src[i] = T(x)
		}
		dst := make([]T, len(xs))
		Unary(c.op, dst, src)
		for i, x := range src {
			want := T(c.ref(float64(x)))
			got := dst[i]
			if c.op == ops.Gelu && math.IsInf(float64(x), -1) {
				want = T(math.NaN()) // -Inf * (1 + tanh(-Inf)) = -Inf * 0
			}
			if want != want {
				assert.True(t, got != got, "%v(%v) = %v, want NaN (%s)", c.op, x, got, dtypeName[T]())
				continue
			}
			if math.IsInf(float64(want), 0) {
				assert.Equal(t, want, got, "%v(%v) (%s)", c.op, x, dtypeName[T]())
				continue
			}
			if math.Abs(float64(want)) < 1e-25 && !math.IsInf(float64(want), 0) {
				assert.InDelta(t, float64(want), float64(got), 1e-25, "%v(%v) (%s)", c.op, x, dtypeName[T]())
				continue
			}
			assert.InEpsilon(t, float64(want), float64(got), 1e-6, "%v(%v) (%s)", c.op, x, dtypeName[T]())
		}
	}
}

func TestUnaryBackwardMatchesDerivative(t *testing.T) {
	testUnaryBackward[float32](t)
	testUnaryBackward[float64](t)
}

func testUnaryBackward[T Float](t *testing.T) {
	for ci, c := range unaryCases {
		for _, n := range []int{1, 7, 300, 140001} {
			t.Run(c.op.String()+"/"+dtypeName[T]()+"/"+shapeName(n), func(t *testing.T) {
				r := newRNG(uint64(7000 + 100*ci + n))
				x := randSlice[T](r, n, c.lo, c.hi)
				if c.op == ops.Relu || c.op == ops.Abs {
					for i := range x { // keep away from the kink
						if math.Abs(float64(x[i])) < 0.1 {
							x[i] = 0.5
						}
					}
				}
				y := make([]T, n)
				Unary(c.op, y, x)
				dy := randSlice[T](r, n, -1, 1)
				want := make([]float64, n)
				for i := range x {
					want[i] = float64(dy[i]) * c.deriv(float64(x[i]))
				}
				usesX, usesY := c.op.BackwardUses()
				xs, ys := x, y
				if !usesX {
					xs = nil
				}
				if !usesY {
					ys = nil
				}
				dx := make([]T, n)
				UnaryBackward(c.op, dx, xs, ys, dy)
				// Ops reading y inherit its rounding: a few ulp in float32.
				requireClose(t, "dx", dx, want, tol[T](3e-6, 1e-13), 1e-6*tol[T](1, 1e-7))
				// dx may alias dy.
				UnaryBackward(c.op, dy, xs, ys, dy)
				require.Equal(t, dx, dy)
			})
		}
	}
}

// TestUnaryBackwardFiniteDifference checks each backward against central
// differences of the forward kernel itself, in float64.
func TestUnaryBackwardFiniteDifference(t *testing.T) {
	const h = 1e-6
	for ci, c := range unaryCases {
		r := newRNG(uint64(900 + ci))
		n := 50
		x := randSlice[float64](r, n, c.lo, c.hi)
		for i := range x {
			if math.Abs(x[i]) < 0.1 {
				x[i] = 0.5
			}
		}
		y := make([]float64, n)
		Unary(c.op, y, x)
		dy := randSlice[float64](r, n, -1, 1)
		dx := make([]float64, n)
		UnaryBackward(c.op, dx, x, y, dy)
		xp, xm, yp, ym := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range x {
			xp[i], xm[i] = x[i]+h*math.Max(1, math.Abs(x[i])), x[i]-h*math.Max(1, math.Abs(x[i]))
		}
		Unary(c.op, yp, xp)
		Unary(c.op, ym, xm)
		for i := range x {
			fd := dy[i] * (yp[i] - ym[i]) / (xp[i] - xm[i])
			require.InDelta(t, fd, dx[i], 1e-6*math.Max(1, math.Abs(fd)), "%v'(%v)", c.op, x[i])
		}
	}
}

func TestUnaryBackwardSpecial(t *testing.T) {
	// Relu passes no gradient at 0 or below; Abs has gradient 0 at 0 and
	// NaN at NaN, as torch.sgn.
	dx := make([]float32, 4)
	UnaryBackward(ops.Relu, dx, nil, []float32{0, 2, -1, 3}, []float32{5, 5, 5, 5})
	assert.Equal(t, []float32{0, 5, 0, 5}, dx)
	UnaryBackward(ops.Abs, dx, []float32{0, 2, -1, float32(math.NaN())}, nil, []float32{5, 5, 5, 5})
	assert.Equal(t, []float32{0, 5, -5}, dx[:3])
	assert.True(t, dx[3] != dx[3])
}

func TestUnaryPanics(t *testing.T) {
	assert.PanicsWithValue(t, "cpukern.Unary: unknown UnaryOp(200)", func() { Unary(ops.UnaryOp(200), []float32{1}, []float32{1}) })
	assert.PanicsWithValue(t, "cpukern.UnaryBackward: unknown UnaryOp(200)", func() {
		UnaryBackward(ops.UnaryOp(200), []float32{1}, nil, nil, []float32{1})
	})
	assert.PanicsWithValue(t, "cpukern.Unary: src has 2 elements, want 1", func() { Unary(ops.Exp, []float32{1}, []float32{1, 2}) })
}

// TestUnaryCoversTheOpTable fails when an op of the table has no case
// here (and so no kernel test).
func TestUnaryCoversTheOpTable(t *testing.T) {
	seen := map[ops.UnaryOp]bool{}
	for _, c := range unaryCases {
		seen[c.op] = true
	}
	for op := range ops.NumUnary {
		assert.True(t, seen[op], "unaryCases has no case for %v", op)
	}
}

func TestSmallKernelsDoNotAllocate(t *testing.T) {
	x := randSlice[float32](newRNG(1), 4096, -1, 1)
	y := make([]float32, len(x))
	bias, trans := merged([]int{64, 64}, []int{64, 1}, []int{0, 1}), merged([]int{64, 64}, []int{1, 64})
	mean, rstd, w := make([]float32, 64), make([]float32, 64), make([]float32, 64)
	dw, dw2 := make([]float32, 4096), make([]float32, 4096)
	ids := make([]int32, 64)
	cases := map[string]func(){
		"Unary":                func() { Unary(ops.Gelu, y, x) },
		"GeluBackward":         func() { GeluBackward(y, x, x) },
		"UnaryBackward/Silu":   func() { UnaryBackward(ops.Silu, y, x, nil, x) },
		"Binary":               func() { Binary(ops.Add, y, bias, x, 0, x, 0) },
		"Softmax":              func() { Softmax(y, x, 64, 64) },
		"ReduceSum":            func() { ReduceSum(y[:64], x, 1, 64, 64, false) },
		"CopyStrided":          func() { CopyStrided(y, trans, x, 0) },
		"Dropout":              func() { Dropout(y, x, 0.1, 1, 2) },
		"LayerNorm":            func() { LayerNorm(y, mean, rstd, x, w, w, 64, 64, 1e-5) },
		"LayerNormBackward":    func() { LayerNormBackward(y, dw[:64], dw2[:64], x, x, mean, rstd, w, 64, 64) },
		"CrossEntropy":         func() { _, _ = CrossEntropy(mean, x, ids, 64, 64, -1) },
		"CrossEntropyBackward": func() { CrossEntropyBackward(y, x, ids, mean, 64, 64, -1) },
		"Gather":               func() { _ = Gather(y, x, ids, 64, 64) },
		"ScatterAdd":           func() { _ = ScatterAdd(y, x, ids, 64, 64) },
		"AdamW":                func() { AdamW(y, x, dw, dw2, 1e-3, 0.9, 0.999, 1e-8, 0, 1) },
		"SumSquares":           func() { _ = SumSquares(x) },
	}
	for name, f := range cases {
		assert.Zero(t, testing.AllocsPerRun(20, f), name)
	}
}
