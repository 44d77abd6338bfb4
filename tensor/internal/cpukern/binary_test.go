package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func binaryRef(op BinaryOp, x, y float64) float64 {
	switch op {
	case Add:
		return x + y
	case Sub:
		return x - y
	case Mul:
		return x * y
	case Div:
		return x / y
	case Max:
		if math.IsNaN(x) || math.IsNaN(y) {
			return math.NaN()
		}
		return math.Max(x, y)
	case Min:
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
		for op := BinaryOp(0); op < numBinaryOps; op++ {
			t.Run(l.name+"/"+op.String()+"/"+dtypeName[T](), func(t *testing.T) {
				r := newRNG(uint64(li*10) + uint64(op))
				lo := -3.0
				if op == Pow || op == Div {
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
				Binary(op, dst, l.shape, a, l.a.off, l.a.strides, b, l.b.off, l.b.strides)
				// Add..Min are one IEEE operation, in the scalar and the vector
				// loops alike: exact. Pow rounds a float64 pow once.
				rtol := 0.0
				if op == Pow {
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
	Binary(Add, want, []int{600, 257}, a, 0, []int{257, 1}, b, 0, []int{0, 1})
	Binary(Add, a, []int{600, 257}, a, 0, []int{257, 1}, b, 0, []int{0, 1})
	require.Equal(t, want, a)
}

func TestBinaryMaxMinNaN(t *testing.T) {
	nan := float32(math.NaN())
	a := []float32{nan, 1, 2, nan}
	b := []float32{1, nan, 1, nan}
	for _, op := range []BinaryOp{Max, Min} {
		d := make([]float32, 4)
		Binary(op, d, []int{4}, a, 0, []int{1}, b, 0, []int{1})
		for i := 0; i < 2; i++ {
			assert.True(t, d[i] != d[i], "%v(%v, %v) = %v, want NaN", op, a[i], b[i], d[i])
		}
		assert.True(t, d[3] != d[3])
	}
}

func TestBinaryPanics(t *testing.T) {
	a := make([]float32, 6)
	assert.PanicsWithValue(t,
		"cpukern.Binary: b view (offset 0, strides [3 1], shape [2 3]) spans [0, 5], outside its 4 elements",
		func() { Binary(Add, a, []int{2, 3}, a, 0, []int{3, 1}, a[:4], 0, []int{3, 1}) })
	assert.PanicsWithValue(t, "cpukern.Binary: a has 1 strides for the 2-d shape [2 3]",
		func() { Binary(Add, a, []int{2, 3}, a, 0, []int{1}, a, 0, []int{3, 1}) })
	assert.PanicsWithValue(t, "cpukern.Binary: dst has 5 elements, want 6",
		func() { Binary(Add, a[:5], []int{2, 3}, a, 0, []int{3, 1}, a, 0, []int{3, 1}) })
	assert.PanicsWithValue(t, "cpukern.Binary: unknown BinaryOp(9)",
		func() { Binary(BinaryOp(9), a, []int{6}, a, 0, []int{1}, a, 0, []int{1}) })
	assert.Equal(t, "Pow", Pow.String())
}

func TestLayoutCoalesce(t *testing.T) {
	var l layout
	require.True(t, l.init("t", []int{4, 5, 6}, []int{30, 6, 1}, []int{0, 6, 1}))
	assert.Equal(t, 2, l.ndim)
	assert.Equal(t, []int{4, 30}, l.shape[:2])
	assert.Equal(t, []int{30, 1}, l.str[0][:2])
	assert.Equal(t, []int{0, 1}, l.str[1][:2])
	require.False(t, l.init("t", []int{4, 0}, []int{1, 1}))
	require.True(t, l.init("t", []int{1, 1}, []int{5, 9}))
	assert.Equal(t, 0, l.ndim)
	deep := make([]int, 17)
	str := make([]int, 17)
	for i := range deep {
		deep[i] = 2
		str[i] = 1 << (2 * (16 - i)) // never mergeable
	}
	assert.Panics(t, func() { l.init("t", deep, str) })
}
