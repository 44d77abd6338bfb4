package cpukern

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/tensor/internal/layout"
	"github.com/strata-ml/strata/tensor/internal/ops"
)

// Binary sets dst = op(a, b) over the merged layout l (internal/layout):
// dst is contiguous row-major with len(dst) == l.Numel(); a and b are
// strided views at offsets aOff and bOff with l's strides 0 and 1 (0 on
// broadcast dims, negative strides allowed). Each row of the innermost
// dim runs one of four loops (eight-lane AVX2 for float32 Add, Sub, Mul
// and Div, bit-identical to the scalar ones): both operands contiguous
// (same-shape ops, and the bias add whose b has strides (0, 1)), a or b a
// scalar along the row, or a general strided loop. dst may alias an
// operand only when that operand is contiguous with the same shape. It
// panics on an unknown op, a wrong dst length, or a view reaching outside
// its slice.
func Binary[T Float](op ops.BinaryOp, dst []T, l *layout.Layout, a []T, aOff int, b []T, bOff int) {
	if op >= ops.NumBinary {
		panic(fmt.Sprintf("cpukern.Binary: unknown %v", op))
	}
	n := l.Numel()
	mustEq("Binary", "dst", len(dst), n)
	checkView("Binary", "a", l, 0, len(a), aOff)
	checkView("Binary", "b", l, 1, len(b), bOff)
	if n == 0 {
		return
	}
	if l.NDim == 0 {
		dst[0] = binScalar(op, a[aOff], b[bOff])
		return
	}
	inner := l.Shape[l.NDim-1]
	rows := n / inner
	if serial(n, grainMem) {
		binaryRows(op, dst, l, a, aOff, b, bOff, 0, rows)
		return
	}
	if rows == 1 {
		sa, sb := l.Strides[0][0], l.Strides[1][0]
		ParallelFor(inner, grainMem, func(lo, hi int) {
			binaryRow(op, dst[lo:hi], a, aOff+lo*sa, sa, b, bOff+lo*sb, sb)
		})
		return
	}
	lc := *l // the closure's copy; *l itself stays on the caller's stack
	ParallelFor(rows, max(1, grainMem/inner), func(lo, hi int) {
		binaryRows(op, dst, &lc, a, aOff, b, bOff, lo, hi)
	})
}

// binaryRows runs rows [lo, hi) of a coalesced layout.
func binaryRows[T Float](op ops.BinaryOp, dst []T, l *layout.Layout, a []T, aOff int, b []T, bOff int, lo, hi int) {
	inner := l.Shape[l.NDim-1]
	sa, sb := l.Strides[0][l.NDim-1], l.Strides[1][l.NDim-1]
	var c rowCursor
	c.seek(l, lo, aOff, bOff)
	for r := lo; r < hi; r++ {
		binaryRow(op, dst[r*inner:(r+1)*inner], a, c.off[0], sa, b, c.off[1], sb)
		c.next(l)
	}
}

// binaryRow sets d[i] = op(a[ao+i*sa], b[bo+i*sb]).
func binaryRow[T Float](op ops.BinaryOp, d, a []T, ao, sa int, b []T, bo, sb int) {
	n := len(d)
	switch {
	case sa == 1 && sb == 1:
		binVV(op, d, a[ao:ao+n], b[bo:bo+n])
	case sa == 1 && sb == 0:
		binVS(op, d, a[ao:ao+n], b[bo])
	case sa == 0 && sb == 1:
		binSV(op, d, a[ao], b[bo:bo+n])
	default:
		for i := range d {
			d[i] = binScalar(op, a[ao], b[bo])
			ao += sa
			bo += sb
		}
	}
}

// binScalar applies op to one pair.
func binScalar[T Float](op ops.BinaryOp, x, y T) T {
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
		if x > y || x != x {
			return x
		}
		return y
	case ops.Min:
		if x < y || x != x {
			return x
		}
		return y
	default:
		return T(pow64(float64(x), float64(y)))
	}
}

// binVV: both operands contiguous.
func binVV[T Float](op ops.BinaryOp, d, a, b []T) {
	if isF32[T]() {
		k := vvSIMD(op, f32(d), f32(a), f32(b))
		d, a, b = d[k:], a[k:], b[k:]
	}
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case ops.Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case ops.Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case ops.Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case ops.Div:
		for i := range d {
			d[i] = a[i] / b[i]
		}
	default:
		for i := range d {
			d[i] = binScalar(op, a[i], b[i])
		}
	}
}

// binVS: b is one scalar for the whole row.
func binVS[T Float](op ops.BinaryOp, d, a []T, s T) {
	if isF32[T]() {
		k := vsSIMD(op, f32(d), f32(a), float32(s))
		d, a = d[k:], a[k:]
	}
	a = a[:len(d)]
	switch op {
	case ops.Add:
		for i, x := range a {
			d[i] = x + s
		}
	case ops.Sub:
		for i, x := range a {
			d[i] = x - s
		}
	case ops.Mul:
		for i, x := range a {
			d[i] = x * s
		}
	case ops.Div:
		for i, x := range a {
			d[i] = x / s
		}
	default:
		for i, x := range a {
			d[i] = binScalar(op, x, s)
		}
	}
}

// binSV: a is one scalar for the whole row.
func binSV[T Float](op ops.BinaryOp, d []T, s T, b []T) {
	if isF32[T]() {
		k := svSIMD(op, f32(d), float32(s), f32(b))
		d, b = d[k:], b[k:]
	}
	b = b[:len(d)]
	switch op {
	case ops.Add:
		for i, y := range b {
			d[i] = s + y
		}
	case ops.Sub:
		for i, y := range b {
			d[i] = s - y
		}
	case ops.Mul:
		for i, y := range b {
			d[i] = s * y
		}
	case ops.Div:
		for i, y := range b {
			d[i] = s / y
		}
	default:
		for i, y := range b {
			d[i] = binScalar(op, s, y)
		}
	}
}

// pow64 is math.Pow with a subnormal base scaled into the normal range
// first: Go's math.Pow takes the amd64 math.Log of it (golang/go#56600).
func pow64(x, y float64) float64 {
	if a := math.Abs(x); a > 0 && a < 0x1p-1022 && !math.IsInf(y, 0) && !math.IsNaN(y) {
		return math.Pow(x*0x1p54, y) * math.Pow(0x1p-54, y)
	}
	return math.Pow(x, y)
}
