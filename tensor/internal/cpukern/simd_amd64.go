//go:build !purego

package cpukern

import (
	"golang.org/x/sys/cpu"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// hasSIMD is true where the AVX2+FMA kernels (exp_amd64.s, gelu_amd64.s)
// can run: x86-64-v3, i.e. Intel Haswell, AMD Excavator and later.
var hasSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// Implemented in exp_amd64.s and gelu_amd64.s; n is a multiple of 8.

//go:noescape
func expShiftAVX2(dst, src *float32, n int, shift float32, acc *[8]float64) int

//go:noescape
func geluAVX2(dst, src *float32, n int) int

//go:noescape
func geluBackwardAVX2(dx, x, dy *float32, n int) int

// The SIMD wrappers run a vector kernel over a prefix of their slices,
// eight elements at a time, and return how many elements were done: they
// stop at the end of the last whole block of eight, or before a block
// holding an argument the vector code leaves to Go (NaN, overflow, the
// subnormal range). Callers do that block and the tail in Go and call
// again. Without AVX2 and FMA they return 0.

// expShiftSIMD is the vector part of expShiftSum32, adding the float64
// values of its results into acc.
func expShiftSIMD(dst, src []float32, shift float32, acc *[8]float64) int {
	n := len(dst) &^ 7
	if !hasSIMD || n == 0 {
		return 0
	}
	src = src[:len(dst)]
	return expShiftAVX2(&dst[0], &src[0], n, shift, acc)
}

// geluSIMD is the vector part of Unary(Gelu) for float32.
func geluSIMD(dst, src []float32) int {
	n := len(dst) &^ 7
	if !hasSIMD || n == 0 {
		return 0
	}
	src = src[:len(dst)]
	return geluAVX2(&dst[0], &src[0], n)
}

// geluBackwardSIMD is the vector part of GeluBackward for float32.
func geluBackwardSIMD(dx, x, dy []float32) int {
	n := len(dx) &^ 7
	if !hasSIMD || n == 0 {
		return 0
	}
	x, dy = x[:len(dx)], dy[:len(dx)]
	return geluBackwardAVX2(&dx[0], &x[0], &dy[0], n)
}

// setSIMD switches the vector kernels on or off (tests of the scalar
// paths) and returns the previous setting. Not safe for concurrent use
// with running kernels.
func setSIMD(on bool) bool {
	old := hasSIMD
	hasSIMD = on && cpu.X86.HasAVX2 && cpu.X86.HasFMA
	return old
}

// Implemented in arith_amd64.s: op is Add, Sub, Mul or Div; n a multiple
// of 8. Bit-identical to the scalar loops (one IEEE operation per lane).

//go:noescape
func vvAVX2(op int, d, a, b *float32, n int)

//go:noescape
func vsAVX2(op int, d, a *float32, s float32, n int)

//go:noescape
func svAVX2(op int, d *float32, s float32, b *float32, n int)

//go:noescape
func axpyAVX2(d *float32, alpha float32, x *float32, n int)

// arithSIMD reports whether op has a vector loop.
func arithSIMD(op ops.BinaryOp) bool { return hasSIMD && op <= ops.Div }

// vvSIMD sets d[i] = a[i] op b[i] over the whole blocks of 8 of d and
// returns how many elements it did (0 without AVX2 or for other ops).
func vvSIMD(op ops.BinaryOp, d, a, b []float32) int {
	n := len(d) &^ 7
	if !arithSIMD(op) || n == 0 {
		return 0
	}
	a, b = a[:len(d)], b[:len(d)]
	vvAVX2(int(op), &d[0], &a[0], &b[0], n)
	return n
}

// vsSIMD sets d[i] = a[i] op s, like vvSIMD.
func vsSIMD(op ops.BinaryOp, d, a []float32, s float32) int {
	n := len(d) &^ 7
	if !arithSIMD(op) || n == 0 {
		return 0
	}
	a = a[:len(d)]
	vsAVX2(int(op), &d[0], &a[0], s, n)
	return n
}

// svSIMD sets d[i] = s op b[i], like vvSIMD.
func svSIMD(op ops.BinaryOp, d []float32, s float32, b []float32) int {
	n := len(d) &^ 7
	if !arithSIMD(op) || n == 0 {
		return 0
	}
	b = b[:len(d)]
	svAVX2(int(op), &d[0], s, &b[0], n)
	return n
}

// axpySIMD sets d[i] += alpha*x[i], like vvSIMD.
func axpySIMD(d []float32, alpha float32, x []float32) int {
	n := len(d) &^ 7
	if !hasSIMD || n == 0 {
		return 0
	}
	x = x[:len(d)]
	axpyAVX2(&d[0], alpha, &x[0], n)
	return n
}
