package cpukern

import (
	"fmt"
	"math"
)

// Row-wise softmax over (rows, cols) row-major data, numerically stable:
// each row subtracts its maximum before exp and sums in float64. As in
// PyTorch, a row of all -Inf, or one holding +Inf or NaN, comes out NaN
// (the max-subtraction gives Inf-Inf); masked attention rows always keep
// at least the diagonal, so they never hit this.

func checkRows(kernel string, rows, cols int, args ...int) {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpukern.%s: negative size (rows %d, cols %d)", kernel, rows, cols))
	}
	for i, n := range args {
		if n != rows*cols {
			panic(fmt.Sprintf("cpukern.%s: argument %d has %d elements, want rows*cols = %d*%d", kernel, i+1, n, rows, cols))
		}
	}
}

// rowGrain is the parallel grain, in rows, of a row kernel over cols
// columns. Row kernels test serial() before building their closure, so
// small calls neither allocate nor start goroutines.
func rowGrain(cols int) int { return max(1, grainRow/max(cols, 1)) }

// Softmax sets each row of dst to softmax of the row of src; dst may be
// src itself. It panics when len(dst) or len(src) != rows*cols.
func Softmax[T Float](dst, src []T, rows, cols int) {
	checkRows("Softmax", rows, cols, len(dst), len(src))
	if cols == 0 {
		return
	}
	if serial(rows*cols, grainRow) {
		softmaxRows(dst, src, cols, 0, rows)
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { softmaxRows(dst, src, cols, lo, hi) })
}

func softmaxRows[T Float](dst, src []T, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		softmaxRow(dst[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols])
	}
}

// softmaxRow sets d to the softmax of s (of d's length).
func softmaxRow[T Float](d, s []T) {
	inv := T(1 / expShift(d, s, rowMax(s)))
	for i := range d {
		d[i] *= inv
	}
}

// LogSoftmax sets each row of dst to x - max - log(sum(exp(x - max))) of
// the row of src; dst may be src itself.
func LogSoftmax[T Float](dst, src []T, rows, cols int) {
	checkRows("LogSoftmax", rows, cols, len(dst), len(src))
	if cols == 0 {
		return
	}
	if serial(rows*cols, grainRow) {
		logSoftmaxRows(dst, src, cols, 0, rows)
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { logSoftmaxRows(dst, src, cols, lo, hi) })
}

func logSoftmaxRows[T Float](dst, src []T, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		d, s := dst[r*cols:(r+1)*cols], src[r*cols:(r+1)*cols]
		m := rowMax(s)
		// (x - m) - log s, as PyTorch: m + log s loses log s once |m|
		// passes about 1e15.
		ls, m64 := math.Log(sumExpShift(s, m)), float64(m)
		s = s[:len(d)]
		for i, v := range s {
			d[i] = T((float64(v) - m64) - ls)
		}
	}
}

// expShift sets d[i] = e^(s[i]-m) over d's length and returns their sum
// in float64.
func expShift[T Float](d, s []T, m T) float64 {
	if isF32[T]() {
		return expShiftSum32(f32(d), f32(s), float32(m))
	}
	d64, s64 := f64(d), f64(s)
	s64 = s64[:len(d64)]
	var sum float64
	for i, v := range s64 {
		e := math.Exp(v - float64(m))
		d64[i] = e
		sum += e
	}
	return sum
}

// sumExpShift returns the float64 sum of e^(x[i]-shift) without writing.
func sumExpShift[T Float](x []T, shift T) float64 {
	if isF32[T]() {
		return sumExpShift32(f32(x), float32(shift))
	}
	var sum float64
	for _, v := range f64(x) {
		sum += math.Exp(v - float64(shift))
	}
	return sum
}

// SoftmaxBackward sets dx = y * (dy - sum(dy*y)) per row, y being
// Softmax's output; dx may be dy itself.
func SoftmaxBackward[T Float](dx, y, dy []T, rows, cols int) {
	checkRows("SoftmaxBackward", rows, cols, len(dx), len(y), len(dy))
	if cols == 0 {
		return
	}
	if serial(rows*cols, grainRow) {
		softmaxBackwardRows(dx, y, dy, cols, 0, rows)
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { softmaxBackwardRows(dx, y, dy, cols, lo, hi) })
}

func softmaxBackwardRows[T Float](dx, y, dy []T, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		softmaxBackwardRow(dx[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols])
	}
}

// softmaxBackwardRow sets d = y * (g - sum(g*y)) over d's length.
func softmaxBackwardRow[T Float](d, y, g []T) {
	s := T(dot(g, y))
	y, g = y[:len(d)], g[:len(d)]
	for i := range d {
		d[i] = y[i] * (g[i] - s)
	}
}

// LogSoftmaxBackward sets dx = dy - exp(y) * sum(dy) per row, y being
// LogSoftmax's output; dx may be dy itself.
func LogSoftmaxBackward[T Float](dx, y, dy []T, rows, cols int) {
	checkRows("LogSoftmaxBackward", rows, cols, len(dx), len(y), len(dy))
	if cols == 0 {
		return
	}
	if serial(rows*cols, grainRow) {
		logSoftmaxBackwardRows(dx, y, dy, cols, 0, rows)
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { logSoftmaxBackwardRows(dx, y, dy, cols, lo, hi) })
}

func logSoftmaxBackwardRows[T Float](dx, y, dy []T, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		d, yy, g := dx[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols]
		s := T(sumRow(g))
		if !isF32[T]() {
			yy, g := f64(yy), f64(g)
			d := f64(d)
			yy, g = yy[:len(d)], g[:len(d)]
			for i := range d {
				d[i] = g[i] - math.Exp(yy[i])*float64(s)
			}
			continue
		}
		d32, y32, g32 := f32(d), f32(yy), f32(g)
		s32 := float32(s)
		var buf [expBlock]float32
		for lo := 0; lo < len(d32); lo += expBlock {
			hi := min(lo+expBlock, len(d32))
			t := buf[:hi-lo]
			exp32Slice(t, y32[lo:hi])
			dd, gg := d32[lo:hi], g32[lo:hi]
			dd, gg = dd[:len(t)], gg[:len(t)]
			for i, e := range t {
				dd[i] = gg[i] - e*s32
			}
		}
	}
}
