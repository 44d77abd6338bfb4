package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// binaryLayouts cover each fast path and the general one.
var binaryLayouts = []struct {
	name  string
	shape []int
	a, b  view
}{
	{"contiguous-1d", []int{1001}, view{0, []int{1}}, view{0, []int{1}}},
	{"contiguous-3d", []int{3, 5, 7}, view{0, []int{35, 7, 1}}, view{0, []int{35, 7, 1}}},
	{"bias", []int{33, 129}, view{0, []int{129, 1}}, view{0, []int{0, 1}}},
	{"bias-3d", []int{4, 9, 17}, view{0, []int{153, 17, 1}}, view{0, []int{0, 0, 1}}},
	{"bias-left", []int{9, 17}, view{0, []int{0, 1}}, view{0, []int{17, 1}}},
	{"scalar-b", []int{6, 11}, view{0, []int{11, 1}}, view{0, []int{0, 0}}},
	{"scalar-a", []int{6, 11}, view{0, []int{0, 0}}, view{0, []int{11, 1}}},
	{"column", []int{13, 8}, view{0, []int{8, 1}}, view{0, []int{1, 0}}},
	{"transposed-a", []int{7, 9}, view{0, []int{1, 7}}, view{0, []int{9, 1}}},
	{"mask-4d", []int{2, 3, 8, 8}, view{0, []int{192, 64, 8, 1}}, view{0, []int{0, 0, 8, 1}}},
	{"offsets", []int{4, 5}, view{3, []int{5, 1}}, view{7, []int{1, 4}}},
	{"negative", []int{5, 6}, view{29, []int{-6, -1}}, view{0, []int{6, 1}}},
	{"unit-dims", []int{1, 7, 1, 3}, view{0, []int{21, 3, 3, 1}}, view{0, []int{0, 0, 0, 1}}},
	{"scalar-0d", []int{}, view{2, []int{}}, view{0, []int{}}},
	{"empty", []int{3, 0, 4}, view{0, []int{0, 4, 1}}, view{0, []int{0, 4, 1}}},
	{"parallel-rows", []int{600, 257}, view{0, []int{257, 1}}, view{0, []int{0, 1}}},
	{"parallel-1d", []int{140001}, view{0, []int{1}}, view{0, []int{1}}},
	{"parallel-strided", []int{300, 500}, view{0, []int{1, 300}}, view{0, []int{500, 1}}},
}

func binaryRef(op ops.BinaryOp, x, y float64) float64 {
	switch op {
	case ops.Add:
		return x + y
	case ops.Sub:
		return x - y
	case ops.Mul:
		return x * y
	case ops.Div:
		return x / y
	case ops.Max:
		if math.IsNaN(x) || math.IsNaN(y) {
			return math.NaN()
		}
		return math.Max(x, y)
	case ops.Min:
		if math.IsNaN(x) || math.IsNaN(y) {
			return math.NaN()
		}
		return math.Min(x, y)
	default:
		return math.Pow(x, y)
	}
}

func TestBinaryMatchesReference(t *testing.T) {
	testBinary[float32](t)
	testBinary[float64](t)
}

func testBinary[T Float](t *testing.T) {
	for li, l := range binaryLayouts {
		for op := range ops.NumBinary {
			t.Run(l.name+"/"+op.String()+"/"+dtypeName[T](), func(t *testing.T) {
				r := newRNG(uint64(li*10) + uint64(op))
				lo := -3.0
				if op == ops.Pow || op == ops.Div {
					lo = 0.5 // positive bases; divisors away from 0
				}
				a := randSlice[T](r, l.a.span(l.shape), lo, 3)
				b := randSlice[T](r, l.b.span(l.shape), lo, 3)
				ao := viewOffsets(l.shape, l.a.off, l.a.strides)
				bo := viewOffsets(l.shape, l.b.off, l.b.strides)
				want := make([]float64, len(ao))
				for i := range ao {
					want[i] = float64(T(binaryRef(op, float64(a[ao[i]]), float64(b[bo[i]]))))
				}
				dst := make([]T, len(ao))
				Binary(op, dst, merged(l.shape, l.a.strides, l.b.strides), a, l.a.off, b, l.b.off)
				// Add..Min are one IEEE operation, in the scalar and the vector
				// loops alike: exact. Pow rounds a float64 pow once.
				rtol := 0.0
				if op == ops.Pow {
					rtol = tol[T](1e-7, 1e-15)
				}
				requireClose(t, "dst", dst, want, rtol, 0)
			})
		}
	}
}

func TestBinaryInPlace(t *testing.T) {
	r := newRNG(5)
	a := randSlice[float32](r, 600*257, -1, 1)
	b := randSlice[float32](r, 257, -1, 1)
	want := make([]float32, len(a))
	l := merged([]int{600, 257}, []int{257, 1}, []int{0, 1})
	Binary(ops.Add, want, l, a, 0, b, 0)
	Binary(ops.Add, a, l, a, 0, b, 0)
	require.Equal(t, want, a)
}

func TestBinaryMaxMinNaN(t *testing.T) {
	nan := float32(math.NaN())
	a := []float32{nan, 1, 2, nan}
	b := []float32{1, nan, 1, nan}
	for _, op := range []ops.BinaryOp{ops.Max, ops.Min} {
		d := make([]float32, 4)
		Binary(op, d, merged([]int{4}, []int{1}, []int{1}), a, 0, b, 0)
		for i := 0; i < 2; i++ {
			assert.True(t, d[i] != d[i], "%v(%v, %v) = %v, want NaN", op, a[i], b[i], d[i])
		}
		assert.True(t, d[3] != d[3])
	}
}

func TestBinaryPanics(t *testing.T) {
	a := make([]float32, 6)
	l := merged([]int{2, 3}, []int{3, 1}, []int{3, 1})
	assert.PanicsWithValue(t,
		"cpukern.Binary: b view (offset 0, strides [1], shape [6]) spans [0, 5], outside its 4 elements",
		func() { Binary(ops.Add, a, l, a, 0, a[:4], 0) })
	assert.PanicsWithValue(t,
		"cpukern.Binary: a view (offset 1, strides [1], shape [6]) spans [1, 6], outside its 6 elements",
		func() { Binary(ops.Add, a, l, a, 1, a, 0) })
	assert.PanicsWithValue(t, "cpukern.Binary: dst has 5 elements, want 6",
		func() { Binary(ops.Add, a[:5], l, a, 0, a, 0) })
	assert.PanicsWithValue(t, "cpukern.Binary: unknown BinaryOp(9)",
		func() { Binary(ops.BinaryOp(9), a, l, a, 0, a, 0) })
}
