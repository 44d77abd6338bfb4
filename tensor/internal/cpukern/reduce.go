package cpukern

import (
	"fmt"
	"math"
)

// Reductions view src as (outer, mid, inner) row-major and reduce mid.
// Sums accumulate in float64 whatever T is; within a row they keep four
// independent accumulators and fold them into a running total every
// sumBlock elements (blocked summation: error ~ (sumBlock + n/sumBlock) ulp
// of float64 rather than n ulp), so float32 sums of 10^6 elements are
// exact to float32 rounding and float64 sums lose only a few ulp.
//
// Parallelism: outputs are split among workers in tiles of reduceTile
// along inner; each output is produced by one worker in a fixed order.
// When there are too few outputs to share (outer == 1 and at most a few
// tiles, as in a bias gradient or a full sum), mid is cut into fixed
// chunks whose float64 partials are added in chunk order. The chunking
// depends only on the sizes, so results are bit-identical at any
// GOMAXPROCS.
const (
	sumBlock    = 1024
	reduceTile  = 256
	reduceChunk = 1 << 15 // elements per chunk of the split-mid path
)

func checkReduce(kernel string, dst, src, outer, mid, inner int) {
	if outer < 0 || mid < 0 || inner < 0 {
		panic(fmt.Sprintf("cpukern.%s: negative size (outer %d, mid %d, inner %d)", kernel, outer, mid, inner))
	}
	mustEq(kernel, "dst", dst, outer*inner)
	mustEq(kernel, "src", src, outer*mid*inner)
}

// splitMid reports whether a reduction should split mid into chunks.
func splitMid(outer, mid, inner int) bool {
	tiles := (inner + reduceTile - 1) / reduceTile
	return outer == 1 && tiles <= 4 && mid*inner >= 2*reduceChunk
}

// ReduceSum sets dst[o*inner+i] = sum over m of src[(o*mid+m)*inner+i], or
// adds the sum to dst when accumulate is true. mid == 0 gives zeros. It
// panics on negative sizes or lengths other than outer*inner and
// outer*mid*inner.
func ReduceSum[T Float](dst, src []T, outer, mid, inner int, accumulate bool) {
	checkReduce("ReduceSum", len(dst), len(src), outer, mid, inner)
	if outer == 0 || inner == 0 {
		return
	}
	if splitMid(outer, mid, inner) {
		reduceSumSplit(dst, src, mid, inner, accumulate)
		return
	}
	tiles := (inner + reduceTile - 1) / reduceTile
	items := outer * tiles
	perItem := max(1, mid*min(inner, reduceTile))
	if serial(items*perItem, grainMem) {
		reduceSumItems(dst, src, mid, inner, tiles, 0, items, accumulate)
		return
	}
	ParallelFor(items, max(1, grainMem/perItem), func(lo, hi int) {
		reduceSumItems(dst, src, mid, inner, tiles, lo, hi, accumulate)
	})
}

// reduceSumItems reduces items [lo, hi); item = o*tiles + tile.
func reduceSumItems[T Float](dst, src []T, mid, inner, tiles, lo, hi int, accumulate bool) {
	var acc [reduceTile]float64
	for it := lo; it < hi; it++ {
		o, t := it/tiles, it%tiles
		i0 := t * reduceTile
		w := min(reduceTile, inner-i0)
		d := dst[o*inner+i0 : o*inner+i0+w]
		if inner == 1 {
			s := sumRow(src[o*mid : (o+1)*mid])
			if accumulate {
				s += float64(d[0])
			}
			d[0] = T(s)
			continue
		}
		a := acc[:w]
		clear(a)
		base := o*mid*inner + i0
		for m := 0; m < mid; m++ {
			addRow(a, src[base+m*inner:base+m*inner+w])
		}
		storeRow(d, a, accumulate)
	}
}

// reduceSumSplit is the chunked path for outer == 1.
func reduceSumSplit[T Float](dst, src []T, mid, inner int, accumulate bool) {
	rowsPer := max(1, reduceChunk/inner)
	chunks := (mid + rowsPer - 1) / rowsPer
	p := getScratch(chunks * inner)
	defer putScratch(p)
	parts := *p
	forChunks(mid, rowsPer, func(c, lo, hi int) {
		part := parts[c*inner : (c+1)*inner]
		if inner == 1 {
			part[0] = sumRow(src[lo:hi])
			return
		}
		for m := lo; m < hi; m++ {
			addRow(part, src[m*inner:(m+1)*inner])
		}
	})
	total := parts[:inner]
	for c := 1; c < chunks; c++ {
		addRow(total, parts[c*inner:(c+1)*inner])
	}
	storeRow(dst, total, accumulate)
}

// addRow adds x to the float64 accumulators acc.
func addRow[T Float](acc []float64, x []T) {
	x = x[:len(acc)]
	for i, v := range x {
		acc[i] += float64(v)
	}
}

// storeRow writes (or adds) float64 sums into d.
func storeRow[T Float](d []T, s []float64, accumulate bool) {
	s = s[:len(d)]
	if accumulate {
		for i, v := range s {
			d[i] = T(float64(d[i]) + v)
		}
		return
	}
	for i, v := range s {
		d[i] = T(v)
	}
}

// sumRow returns the blocked float64 sum of x.
func sumRow[T Float](x []T) float64 {
	var total float64
	for len(x) > 0 {
		b := x[:min(len(x), sumBlock)]
		x = x[len(b):]
		var a0, a1, a2, a3 float64
		i := 0
		for ; i+4 <= len(b); i += 4 {
			q := b[i : i+4 : i+4]
			a0 += float64(q[0])
			a1 += float64(q[1])
			a2 += float64(q[2])
			a3 += float64(q[3])
		}
		for ; i < len(b); i++ {
			a0 += float64(b[i])
		}
		total += (a0 + a1) + (a2 + a3)
	}
	return total
}

// ReduceMax sets dst[o*inner+i] = max over m of src[(o*mid+m)*inner+i].
// NaN propagates (as torch.amax); mid == 0 gives -Inf. It panics like
// ReduceSum.
func ReduceMax[T Float](dst, src []T, outer, mid, inner int) {
	checkReduce("ReduceMax", len(dst), len(src), outer, mid, inner)
	if outer == 0 || inner == 0 {
		return
	}
	tiles := (inner + reduceTile - 1) / reduceTile
	items := outer * tiles
	perItem := max(1, mid*min(inner, reduceTile))
	if splitMid(outer, mid, inner) {
		// Max is exact, so any split gives the same result; chunk mid.
		rowsPer := max(1, reduceChunk/inner)
		chunks := (mid + rowsPer - 1) / rowsPer
		p := getScratch(chunks * inner)
		defer putScratch(p)
		parts := *p
		forChunks(mid, rowsPer, func(c, lo, hi int) {
			part := parts[c*inner : (c+1)*inner]
			for i := range part {
				part[i] = math.Inf(-1)
			}
			maxRows(part, src, lo, hi, inner, 0)
		})
		for c := 1; c < chunks; c++ {
			maxInto(parts[:inner], parts[c*inner:(c+1)*inner])
		}
		for i, v := range parts[:inner] {
			dst[i] = T(v)
		}
		return
	}
	if serial(items*perItem, grainMem) {
		reduceMaxItems(dst, src, mid, inner, tiles, 0, items)
		return
	}
	ParallelFor(items, max(1, grainMem/perItem), func(lo, hi int) {
		reduceMaxItems(dst, src, mid, inner, tiles, lo, hi)
	})
}

func reduceMaxItems[T Float](dst, src []T, mid, inner, tiles, lo, hi int) {
	var acc [reduceTile]float64
	for it := lo; it < hi; it++ {
		o, t := it/tiles, it%tiles
		i0 := t * reduceTile
		w := min(reduceTile, inner-i0)
		a := acc[:w]
		for i := range a {
			a[i] = math.Inf(-1)
		}
		maxRows(a, src, o*mid, (o+1)*mid, inner, i0)
		d := dst[o*inner+i0 : o*inner+i0+w]
		for i, v := range a {
			d[i] = T(v)
		}
	}
}

// maxRows folds rows [lo, hi) of src (row length inner, columns from i0,
// len(acc) of them) into acc.
func maxRows[T Float](acc []float64, src []T, lo, hi, inner, i0 int) {
	if len(acc) == 1 && inner == 1 {
		m := acc[0]
		for _, v := range src[lo:hi] {
			if f := float64(v); f > m || f != f {
				m = f
				if f != f {
					break
				}
			}
		}
		acc[0] = m
		return
	}
	for m := lo; m < hi; m++ {
		row := src[m*inner+i0 : m*inner+i0+len(acc)]
		for i, v := range row {
			if f := float64(v); f > acc[i] || f != f {
				acc[i] = f
			}
		}
	}
}

// maxInto sets acc = max(acc, x) element-wise, NaN propagating.
func maxInto(acc, x []float64) {
	x = x[:len(acc)]
	for i, v := range x {
		if v > acc[i] || v != v {
			acc[i] = v
		}
	}
}

// SumSquares returns the float64 sum of x[i]^2 (for gradient-norm
// clipping). Chunked like ReduceSum's split path: bit-identical at any
// GOMAXPROCS.
func SumSquares[T Float](x []T) float64 {
	n := len(x)
	if n < 2*reduceChunk {
		return sumSqRow(x)
	}
	chunks := (n + reduceChunk - 1) / reduceChunk
	p := getScratch(chunks)
	defer putScratch(p)
	parts := *p
	forChunks(n, reduceChunk, func(c, lo, hi int) { parts[c] = sumSqRow(x[lo:hi]) })
	var s float64
	for _, v := range parts {
		s += v
	}
	return s
}

func sumSqRow[T Float](x []T) float64 {
	var total float64
	for len(x) > 0 {
		b := x[:min(len(x), sumBlock)]
		x = x[len(b):]
		var a0, a1, a2, a3 float64
		i := 0
		for ; i+4 <= len(b); i += 4 {
			q := b[i : i+4 : i+4]
			v0, v1, v2, v3 := float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3])
			a0 += v0 * v0
			a1 += v1 * v1
			a2 += v2 * v2
			a3 += v3 * v3
		}
		for ; i < len(b); i++ {
			v := float64(b[i])
			a0 += v * v
		}
		total += (a0 + a1) + (a2 + a3)
	}
	return total
}
