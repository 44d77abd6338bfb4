package cpukern

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/strata-ml/strata/tensor/internal/layout"
)

// newRNG returns a deterministic generator; every test draws fresh inputs
// from its own seed.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randSlice returns n values uniform in [lo, hi).
func randSlice[T Float](r *rand.Rand, n int, lo, hi float64) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(lo + (hi-lo)*r.Float64())
	}
	return s
}

func to64[T Float](s []T) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

// dtypeName names T in subtest names.
func dtypeName[T Float]() string {
	if isF32[T]() {
		return "float32"
	}
	return "float64"
}

// requireClose fails unless |got-want| <= atol + rtol*|want| everywhere
// (NaN must match NaN, infinities must match exactly), reporting the worst
// element.
func requireClose[T Float](t testing.TB, name string, got []T, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", name, len(got), len(want))
	}
	worst, wi := 0.0, -1
	for i, w := range want {
		g := float64(got[i])
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) != math.IsNaN(g) {
				t.Fatalf("%s[%d] = %v, want %v", name, i, g, w)
			}
			continue
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if g != w {
				t.Fatalf("%s[%d] = %v, want %v", name, i, g, w)
			}
			continue
		}
		if e := math.Abs(g-w) / (atol + rtol*math.Abs(w)); e > worst {
			worst, wi = e, i
		}
	}
	if worst > 1 {
		t.Fatalf("%s[%d] = %.10g, want %.10g (error %.3g of the tolerance rtol %g atol %g)",
			name, wi, float64(got[wi]), want[wi], worst, rtol, atol)
	}
}

// tol returns the relative tolerance for T: float32 results are computed
// with float64 or float32 accumulators and must be within a few ulp.
func tol[T Float](f32tol, f64tol float64) float64 {
	if isF32[T]() {
		return f32tol
	}
	return f64tol
}

// rowShapes are (rows, cols) cases: odd sizes, a single row, a single
// column, GPT sizes, and ones large enough for the parallel path.
var rowShapes = [][2]int{{1, 1}, {1, 7}, {5, 1}, {3, 17}, {7, 64}, {33, 129}, {64, 256}, {300, 131}, {1024, 128}}

func shapeName(dims ...int) string { return fmt.Sprint(dims) }

// withProcs runs f at the given GOMAXPROCS, restoring it afterwards.
func withProcs(n int, f func()) {
	old := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(old)
	f()
}

// numel is the product of shape.
func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// merged is the layout package computes for a view of shape with the
// given strides (one or two operands), as the tensor package hands it to
// the strided kernels.
func merged(shape []int, strides ...[]int) *layout.Layout {
	l, ok := layout.Merge(shape, strides...)
	if !ok {
		panic(fmt.Sprintf("shape %v has too many dims to merge", shape))
	}
	return &l
}

// viewOffsets lists, in row-major order of shape, the offsets of a strided
// view's elements: the straightforward reference for strided kernels.
func viewOffsets(shape []int, off int, strides []int) []int {
	n := numel(shape)
	out := make([]int, 0, n)
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		o := off
		for d := range shape {
			o += idx[d] * strides[d]
		}
		out = append(out, o)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// view is a strided operand for the tests: a buffer just large enough.
type view struct {
	off     int
	strides []int
}

// span returns the buffer length a view needs.
func (v view) span(shape []int) int {
	hi := v.off
	for d, s := range shape {
		if v.strides[d] > 0 {
			hi += (s - 1) * v.strides[d]
		}
	}
	return hi + 1
}
