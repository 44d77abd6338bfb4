package cpukern

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var reduceShapes = [][3]int{
	{1, 1, 1}, {3, 5, 1}, {2, 7, 3}, {5, 0, 3}, {0, 3, 4}, {4, 1, 9},
	{1, 1024, 384}, // bias gradient: split-mid path
	{1, 100003, 1}, // full sum: split-mid path
	{4, 300, 257},  // tiled, parallel
	{1000, 130, 1}, // row sums, parallel
	{3, 20000, 2},  // long mid, narrow inner
	{2, 64, 600},   // several tiles
}

// reduceRef returns the exact-ish (float64, Kahan-free but tiny sizes of
// error) sums and the sum of |x| per output, used as the error scale.
func reduceRef[T Float](src []T, outer, mid, inner int) (sum, abs, mx []float64) {
	sum = make([]float64, outer*inner)
	abs = make([]float64, outer*inner)
	mx = make([]float64, outer*inner)
	for o := 0; o < outer; o++ {
		for i := 0; i < inner; i++ {
			s, a, m := 0.0, 0.0, math.Inf(-1)
			for k := 0; k < mid; k++ {
				v := float64(src[(o*mid+k)*inner+i])
				s += v
				a += math.Abs(v)
				m = math.Max(m, v)
			}
			sum[o*inner+i], abs[o*inner+i], mx[o*inner+i] = s, a, m
		}
	}
	return sum, abs, mx
}

func TestReduceMatchesReference(t *testing.T) {
	testReduce[float32](t)
	testReduce[float64](t)
}

func testReduce[T Float](t *testing.T) {
	for si, sh := range reduceShapes {
		outer, mid, inner := sh[0], sh[1], sh[2]
		t.Run(shapeName(outer, mid, inner)+"/"+dtypeName[T](), func(t *testing.T) {
			r := newRNG(uint64(si))
			src := randSlice[T](r, outer*mid*inner, -1, 1)
			sum, abs, mx := reduceRef(src, outer, mid, inner)
			dst := make([]T, outer*inner)
			ReduceSum(dst, src, outer, mid, inner, false)
			rt := tol[T](1.2e-7, 1e-14) // float32: one final rounding
			for i := range dst {
				require.InDelta(t, sum[i], float64(dst[i]), rt*(abs[i]+math.Abs(sum[i]))+1e-300, "sum[%d]", i)
			}
			base := randSlice[T](r, outer*inner, -1, 1)
			acc := append([]T(nil), base...)
			ReduceSum(acc, src, outer, mid, inner, true)
			for i := range acc {
				want := sum[i] + float64(base[i])
				require.InDelta(t, want, float64(acc[i]), rt*(abs[i]+math.Abs(want)+1)+1e-300, "accumulated sum[%d]", i)
			}
			ReduceMax(dst, src, outer, mid, inner)
			for i := range dst {
				require.Equal(t, T(mx[i]), dst[i], "max[%d]", i)
			}
		})
	}
}

func TestReduceSumFloat32Precision(t *testing.T) {
	// 10^6 positive float32 values: the float64 accumulators keep the
	// result at float32 rounding (relative 6e-8), where naive float32
	// accumulation drifts by ~1e-4.
	r := newRNG(42)
	const n = 1_000_000
	x := randSlice[float32](r, n, 0, 1)
	exact := 0.0
	for _, v := range x {
		exact += float64(v)
	}
	got := make([]float32, 1)
	ReduceSum(got, x, 1, n, 1, false)
	assert.InEpsilon(t, exact, float64(got[0]), 1e-7)
	assert.InEpsilon(t, func() float64 {
		s := 0.0
		for _, v := range x {
			s += float64(v) * float64(v)
		}
		return s
	}(), SumSquares(x), 1e-12)
}

func TestReduceMaxNaN(t *testing.T) {
	nan := math.NaN()
	src := []float64{1, nan, 3, 2, 5, 4}
	dst := make([]float64, 2)
	ReduceMax(dst, src, 2, 3, 1)
	assert.True(t, math.IsNaN(dst[0]))
	assert.Equal(t, 5.0, dst[1])
	ReduceMax(dst, src, 1, 3, 2) // columns: (1, 3, 5) and (nan, 2, 4)
	assert.Equal(t, 5.0, dst[0])
	assert.True(t, math.IsNaN(dst[1]))
	ReduceMax(dst, nil, 2, 0, 1)
	assert.Equal(t, []float64{math.Inf(-1), math.Inf(-1)}, dst)
}

func TestSumSquares(t *testing.T) {
	for _, n := range []int{0, 1, 5, 1000, 70001, 300000} {
		x := randSlice[float32](newRNG(uint64(n)), n, -2, 2)
		want := 0.0
		for _, v := range x {
			want += float64(v) * float64(v)
		}
		assert.InDelta(t, want, SumSquares(x), 1e-12*want+1e-300, "n %d", n)
	}
}

// TestReductionsDeterministic checks that every reduction that runs in
// parallel returns the same bits at any GOMAXPROCS.
func TestReductionsDeterministic(t *testing.T) {
	r := newRNG(77)
	x := randSlice[float32](r, 3000*384, -1, 1)
	dy := randSlice[float32](r, 3000*384, -1, 1)
	ids := make([]int32, 3000)
	for i := range ids {
		ids[i] = int32(r.IntN(50))
	}
	type result struct {
		sum, col []float32
		sq       float64
		dw, db   []float32
		table    []float32
	}
	run := func() result {
		var res result
		res.sum = make([]float32, 1)
		ReduceSum(res.sum, x, 1, len(x), 1, false)
		res.col = make([]float32, 384)
		ReduceSum(res.col, x, 1, 3000, 384, false)
		res.sq = SumSquares(x)
		y := make([]float32, len(x))
		mean, rstd := make([]float32, 3000), make([]float32, 3000)
		LayerNorm(y, mean, rstd, x, nil, nil, 3000, 384, 1e-5)
		dx := make([]float32, len(x))
		res.dw, res.db = make([]float32, 384), make([]float32, 384)
		LayerNormBackward(dx, res.dw, res.db, dy, x, mean, rstd, nil, 3000, 384)
		res.table = make([]float32, 50*384)
		require.NoError(t, ScatterAdd(res.table, dy, ids, 384, 50))
		return res
	}
	var ref result
	withProcs(1, func() { ref = run() })
	for _, p := range []int{2, 3, 4} {
		withProcs(p, func() {
			got := run()
			assert.Equal(t, ref, got, "GOMAXPROCS %d", p)
		})
	}
}

func TestReducePanics(t *testing.T) {
	assert.PanicsWithValue(t, "cpukern.ReduceSum: src has 5 elements, want 6", func() {
		ReduceSum(make([]float32, 2), make([]float32, 5), 2, 3, 1, false)
	})
	assert.PanicsWithValue(t, "cpukern.ReduceMax: negative size (outer 1, mid -1, inner 1)", func() {
		ReduceMax(make([]float32, 1), nil, 1, -1, 1)
	})
}
