package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// ulps returns |got - want| in units of the float32 ulp at want.
func ulps(got float32, want float64) float64 { return errUlps(got, want, 0) }

// errUlps returns |got - want| in float32 ulps of max(|want|, floor).
func errUlps(got float32, want, floor float64) float64 {
	w := float32(math.Max(math.Abs(want), floor))
	if w == 0 || math.IsInf(float64(w), 0) {
		return math.Abs(float64(got)-want) / math.SmallestNonzeroFloat32
	}
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1)))) - float64(w)
	return math.Abs(float64(got)-want) / ulp
}

// sweep calls f on float32 arguments spaced step apart across [lo, hi),
// plus every power-of-two magnitude down to the subnormals.
func sweep(lo, hi, step float64, f func(x float32)) {
	for x := lo; x < hi; x += step {
		f(float32(x))
	}
	for e := -149; e < 8; e++ {
		v := float32(math.Ldexp(1.37, e))
		f(v)
		f(-v)
	}
}

func TestExp32Accuracy(t *testing.T) {
	// Every float32 exp path: the scalar function, the scalar loop, and the
	// vector loop (where the CPU has it) that exp32Slice uses for blocks of 8.
	var xs []float32
	sweep(-104, 89, 1e-3, func(x float32) { xs = append(xs, x) })
	loop := make([]float32, len(xs))
	exp32Slice(loop, xs)
	scalar := make([]float32, len(xs))
	expShiftSumScalar(scalar, xs, 0)
	t.Logf("vector exp in use: %v", hasSIMD)
	for name, got := range map[string]func(i int) float32{
		"exp32":       func(i int) float32 { return exp32(xs[i]) },
		"scalar loop": func(i int) float32 { return scalar[i] },
		"exp32Slice":  func(i int) float32 { return loop[i] },
	} {
		worst := 0.0
		var at float32
		for i, x := range xs {
			want := math.Exp(float64(x))
			g := got(i)
			if want > math.MaxFloat32 {
				require.True(t, math.IsInf(float64(g), 1), "%s(%v) = %v", name, x, g)
				continue
			}
			if want < 0x1p-126 { // subnormal results: absolute error only
				require.InDelta(t, want, float64(g), 0x1p-149, "%s(%v)", name, x)
				continue
			}
			if u := ulps(g, want); u > worst {
				worst, at = u, x
			}
		}
		t.Logf("%s: worst %.2f ulp at %v", name, worst, at)
		assert.LessOrEqual(t, worst, 2.0, "%s worst error at %v", name, at)
	}
	assert.Equal(t, float32(0), exp32(float32(math.Inf(-1))))
}

func TestExpShiftSumSpecialBlocks(t *testing.T) {
	// Specials at every position of vector blocks, with the shift applied
	// and the float64 sum checked, for lengths around the block size.
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -200, 100, -87.4, 88.5}
	r := newRNG(4)
	for _, n := range []int{1, 7, 8, 9, 16, 23, 64, 257} {
		for _, sp := range specials {
			for pos := 0; pos < n; pos += 1 + n/9 {
				src := randSlice[float32](r, n, -10, 10)
				src[pos] = sp + 3
				dst := make([]float32, n)
				sum := expShiftSum32(dst, src, 3)
				want := 0.0
				for i, v := range src {
					w := math.Exp(float64(v - 3))
					want += float64(dst[i])
					if math.IsNaN(w) {
						require.True(t, dst[i] != dst[i], "n %d pos %d: e^%v = %v", n, pos, v-3, dst[i])
						continue
					}
					if w < 0x1p-126 || w > math.MaxFloat32 {
						require.Equal(t, float32(w), dst[i], "n %d pos %d: e^%v", n, pos, v-3)
						continue
					}
					require.LessOrEqual(t, ulps(dst[i], w), 2.0, "n %d pos %d: e^%v = %v, want %v", n, pos, v-3, dst[i], w)
				}
				if math.IsNaN(want) {
					require.True(t, math.IsNaN(sum))
				} else {
					require.InDelta(t, want, sum, 1e-12*math.Abs(want)+1e-300, "n %d pos %d", n, pos)
				}
			}
		}
	}
}

func TestTanh32Accuracy(t *testing.T) {
	worst := 0.0
	var at float32
	sweep(-12, 12, 1e-4, func(x float32) {
		if u := ulps(tanh32(x), math.Tanh(float64(x))); u > worst {
			worst, at = u, x
		}
	})
	t.Logf("tanh32: worst %.2f ulp at %v", worst, at)
	assert.LessOrEqual(t, worst, 4.0, "tanh32 worst error at %v", at)
	assert.Equal(t, float32(1), tanh32(float32(math.Inf(1))))
	assert.Equal(t, float32(-1), tanh32(float32(math.Inf(-1))))
	assert.True(t, math.IsNaN(float64(tanh32(float32(math.NaN())))))
	assert.True(t, math.Signbit(float64(tanh32(float32(math.Copysign(0, -1))))), "tanh(-0) = -0")
}

func TestSigmoidGelu32Accuracy(t *testing.T) {
	// A float32 kernel forms the exp argument in float32 (as PyTorch's
	// vectorised GELU does), so its rounding, a few ulp of |2u|, is
	// amplified by |2u| in the result: the bound is ulp + 3|2u| ulp. The
	// far tail (|result| < 1e-30) is checked in absolute terms.
	type fn struct {
		name string
		got  func(float32) float32
		want func(float64) float64
		ulp  float64
		arg  func(float64) float64 // |exp argument|, amplifying its rounding
		// floor: errors are measured in ulp of max(|want|, floor); gelu'
		// crosses zero near x = -0.75, where relative error means nothing.
		floor float64
	}
	noArg := func(float64) float64 { return 0 }
	u2 := func(x float64) float64 { return math.Abs(2 * math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)) }
	geluRef := func(x float64) float64 { return x * geluSig(x) }
	fns := []fn{
		{"sigmoid", sigmoid32, func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }, 3, noArg, 0},
		{"gelu", gelu32, geluRef, 4, u2, 0},
		{"geluGrad", geluGrad32, geluGradRef, 6, u2, 0.25},
	}
	// The slice kernels (vector loops where the CPU has them) on the same
	// sweep.
	var xs []float32
	sweep(-30, 30, 1e-3, func(x float32) { xs = append(xs, x) })
	index := make(map[float32]int, len(xs))
	for i, x := range xs {
		index[x] = i
	}
	geluSlice, gradSlice, ones := make([]float32, len(xs)), make([]float32, len(xs)), make([]float32, len(xs))
	Fill(ones, 1)
	Unary(ops.Gelu, geluSlice, xs)
	GeluBackward(gradSlice, xs, ones)
	fns = append(fns,
		fn{"Unary(Gelu)", func(x float32) float32 { return geluSlice[index[x]] }, geluRef, 4, u2, 0},
		fn{"GeluBackward", func(x float32) float32 { return gradSlice[index[x]] }, geluGradRef, 6, u2, 0.25})
	for _, f := range fns {
		worst := 0.0
		var at float32
		sweep(-30, 30, 1e-3, func(x float32) {
			want := f.want(float64(x))
			g := f.got(x)
			if math.Abs(want) < 1e-30 {
				require.InDelta(t, want, float64(g), 1e-30, "%s(%v)", f.name, x)
				return
			}
			if u := errUlps(g, want, f.floor) / (f.ulp + 3*f.arg(float64(x))); u > worst {
				worst, at = u, x
			}
		})
		t.Logf("%s32: worst error %.2f of its bound, at %v", f.name, worst, at)
		assert.LessOrEqual(t, worst, 1.0, "%s32 worst error at %v", f.name, at)
	}
	// Specials anywhere in a vector block are left to the scalar code.
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -12, -10.2, 0}
	for _, n := range []int{8, 13, 24} {
		for _, sp := range specials {
			for pos := 0; pos < n; pos += 3 {
				x := randSlice[float32](newRNG(uint64(n+pos)), n, -4, 4)
				x[pos] = sp
				y, dx := make([]float32, n), make([]float32, n)
				dy := randSlice[float32](newRNG(7), n, -1, 1)
				Unary(ops.Gelu, y, x)
				GeluBackward(dx, x, dy)
				for i, v := range x {
					wy, wd := gelu32(v), dy[i]*geluGrad32(v)
					if wy != wy {
						require.True(t, y[i] != y[i], "gelu(%v) = %v", v, y[i])
					} else {
						require.InDelta(t, float64(wy), float64(y[i]), 3e-6*math.Abs(float64(wy))+1e-30, "gelu(%v)", v)
					}
					if wd != wd {
						require.True(t, dx[i] != dx[i], "gelu'(%v) = %v", v, dx[i])
					} else {
						require.InDelta(t, float64(wd), float64(dx[i]), 3e-6*math.Abs(float64(dy[i]))+1e-30, "gelu'(%v)", v)
					}
				}
			}
		}
	}
	assert.Equal(t, float32(0), sigmoid32(-200))
	assert.Equal(t, float32(1), sigmoid32(200))
	assert.Equal(t, float32(0), gelu32(-200)*0, "gelu(-200) is finite")
	assert.Equal(t, float32(200), gelu32(200))
}

// The GELU references: 0.5 x (1 + tanh u) = x sigmoid(2u). The sigmoid
// form is used because the tanh form cancels to 0 in float64 for x < -9,
// where the true values are still normal float32 numbers.
func geluSig(x float64) float64 {
	return 1 / (1 + math.Exp(-2*math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func geluTanhForm(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func geluGradRef(x float64) float64 {
	s := geluSig(x)
	return s + 2*x*s*(1-s)*math.Sqrt(2/math.Pi)*(1+3*0.044715*x*x)
}

func geluGradTanhForm(x float64) float64 {
	u := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
	th := math.Tanh(u)
	return 0.5*(1+th) + 0.5*x*(1-th*th)*math.Sqrt(2/math.Pi)*(1+3*0.044715*x*x)
}

func TestGeluFormsAgree(t *testing.T) {
	// Where the tanh form does not cancel, both forms agree to float64
	// rounding: the sigmoid form is the same function.
	for x := -3.0; x < 30; x += 1e-3 {
		require.InEpsilon(t, geluTanhForm(x), x*geluSig(x)+1e-300, 1e-13, "gelu(%v)", x)
		require.InDelta(t, geluGradTanhForm(x), geluGradRef(x), 1e-13, "gelu'(%v)", x)
	}
}
