package cpukern

import (
	"fmt"
	"math"
)

// BinaryOp names an element-wise function of two operands for Binary.
type BinaryOp uint8

// The binary functions. Max and Min propagate NaN (torch.maximum and
// torch.minimum); Pow is computed in float64 and rounded once.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
	Pow
	numBinaryOps
)

var binaryNames = [numBinaryOps]string{Add: "Add", Sub: "Sub", Mul: "Mul", Div: "Div", Max: "Max", Min: "Min", Pow: "Pow"}

// String returns the op's name, such as "Add".
func (op BinaryOp) String() string {
	if op < numBinaryOps {
		return binaryNames[op]
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(op))
}

// Binary sets dst = op(a, b) over shape. dst is contiguous row-major with
// len(dst) == product(shape); a and b are strided views (offset and one
// stride per dim, stride 0 on broadcast dims, negative strides allowed).
// Dims are first coalesced, then each row of the innermost dim runs one of
// four loops (eight-lane AVX2 for float32 Add, Sub, Mul and Div, bit-
// identical to the scalar ones): both operands contiguous (same-shape ops, and the bias add
// whose b has strides (0,...,0,1)), a or b a scalar along the row, or a
// general strided loop. dst may alias an operand only when that operand is
// contiguous with the same shape. It panics on an unknown op, mismatched
// ranks or lengths, or a view reaching outside its slice.
func Binary[T Float](op BinaryOp, dst []T, shape []int, a []T, aOff int, aStrides []int, b []T, bOff int, bStrides []int) {
	if op >= numBinaryOps {
		panic(fmt.Sprintf("cpukern.Binary: unknown %v", op))
	}
	checkView("Binary", "a", shape, len(a), aOff, aStrides)
	checkView("Binary", "b", shape, len(b), bOff, bStrides)
	n := numel(shape)
	mustEq("Binary", "dst", len(dst), n)
	var l layout
	if n == 0 || !l.init("Binary", shape, aStrides, bStrides) {
		return
	}
	if l.ndim == 0 {
		dst[0] = binScalar(op, a[aOff], b[bOff])
		return
	}
	inner := l.shape[l.ndim-1]
	rows := n / inner
	if serial(n, grainMem) {
		binaryRows(op, dst, &l, a, aOff, b, bOff, 0, rows)
		return
	}
	if rows == 1 {
		sa, sb := l.str[0][0], l.str[1][0]
		ParallelFor(inner, grainMem, func(lo, hi int) {
			binaryRow(op, dst[lo:hi], a, aOff+lo*sa, sa, b, bOff+lo*sb, sb)
		})
		return
	}
	lc := l // the closure's copy; l itself stays on the stack
	ParallelFor(rows, max(1, grainMem/inner), func(lo, hi int) {
		binaryRows(op, dst, &lc, a, aOff, b, bOff, lo, hi)
	})
}

// binaryRows runs rows [lo, hi) of a coalesced layout.
func binaryRows[T Float](op BinaryOp, dst []T, l *layout, a []T, aOff int, b []T, bOff int, lo, hi int) {
	inner := l.shape[l.ndim-1]
	sa, sb := l.str[0][l.ndim-1], l.str[1][l.ndim-1]
	var c rowCursor
	c.seek(l, lo, aOff, bOff)
	for r := lo; r < hi; r++ {
		binaryRow(op, dst[r*inner:(r+1)*inner], a, c.off[0], sa, b, c.off[1], sb)
		c.next(l)
	}
}

// binaryRow sets d[i] = op(a[ao+i*sa], b[bo+i*sb]).
func binaryRow[T Float](op BinaryOp, d, a []T, ao, sa int, b []T, bo, sb int) {
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
func binScalar[T Float](op BinaryOp, x, y T) T {
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
		if x > y || x != x {
			return x
		}
		return y
	case Min:
		if x < y || x != x {
			return x
		}
		return y
	default:
		return T(math.Pow(float64(x), float64(y)))
	}
}

// binVV: both operands contiguous.
func binVV[T Float](op BinaryOp, d, a, b []T) {
	if isF32[T]() {
		k := vvSIMD(op, f32(d), f32(a), f32(b))
		d, a, b = d[k:], a[k:], b[k:]
	}
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case Add:
		for i := range d {
			d[i] = a[i] + b[i]
		}
	case Sub:
		for i := range d {
			d[i] = a[i] - b[i]
		}
	case Mul:
		for i := range d {
			d[i] = a[i] * b[i]
		}
	case Div:
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
func binVS[T Float](op BinaryOp, d, a []T, s T) {
	if isF32[T]() {
		k := vsSIMD(op, f32(d), f32(a), float32(s))
		d, a = d[k:], a[k:]
	}
	a = a[:len(d)]
	switch op {
	case Add:
		for i, x := range a {
			d[i] = x + s
		}
	case Sub:
		for i, x := range a {
			d[i] = x - s
		}
	case Mul:
		for i, x := range a {
			d[i] = x * s
		}
	case Div:
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
func binSV[T Float](op BinaryOp, d []T, s T, b []T) {
	if isF32[T]() {
		k := svSIMD(op, f32(d), float32(s), f32(b))
		d, b = d[k:], b[k:]
	}
	b = b[:len(d)]
	switch op {
	case Add:
		for i, y := range b {
			d[i] = s + y
		}
	case Sub:
		for i, y := range b {
			d[i] = s - y
		}
	case Mul:
		for i, y := range b {
			d[i] = s * y
		}
	case Div:
		for i, y := range b {
			d[i] = s / y
		}
	default:
		for i, y := range b {
			d[i] = binScalar(op, s, y)
		}
	}
}
