package cpukern

import "github.com/strata-ml/strata/tensor/internal/layout"

// transposeTile is the side of the square tiles in which CopyStrided
// transposes: 32x32 elements of up to 8 bytes read and write 8 KiB each,
// well inside L1.
const transposeTile = 32

// CopyStrided gathers the strided view of src at offset srcOff with the
// merged layout l (internal/layout; operand 0's strides) into the
// contiguous dst (len(dst) == l.Numel()). Rows whose innermost stride is
// 1 are copied with copy(); a view whose two innermost dims are a
// transpose (l.Transposed: x.T, or the (B,H,T,D) <-> (B,T,H,D) permutes
// of attention) goes through cache-sized tiles; anything else runs a
// strided loop per row. dst must not overlap src. It panics on a wrong
// dst length or a view reaching outside src.
func CopyStrided[T any](dst []T, l *layout.Layout, src []T, srcOff int) {
	n := l.Numel()
	mustEq("CopyStrided", "dst", len(dst), n)
	checkView("CopyStrided", "src", l, 0, len(src), srcOff)
	if n == 0 {
		return
	}
	if l.NDim == 0 {
		dst[0] = src[srcOff]
		return
	}
	inner := l.Shape[l.NDim-1]
	if l.Transposed() {
		copyTransposed(dst, src, srcOff, l)
		return
	}
	rows := n / inner
	if serial(n, grainMem) {
		copyRows(dst, src, srcOff, l, 0, rows)
		return
	}
	if rows == 1 {
		s := l.Strides[0][0]
		ParallelFor(inner, grainMem, func(lo, hi int) { copyRow(dst[lo:hi], src, srcOff+lo*s, s) })
		return
	}
	lc := *l
	ParallelFor(rows, max(1, grainMem/inner), func(lo, hi int) { copyRows(dst, src, srcOff, &lc, lo, hi) })
}

func copyRows[T any](dst, src []T, off int, l *layout.Layout, lo, hi int) {
	inner := l.Shape[l.NDim-1]
	s := l.Strides[0][l.NDim-1]
	var c rowCursor
	c.seek(l, lo, off, 0)
	for r := lo; r < hi; r++ {
		copyRow(dst[r*inner:(r+1)*inner], src, c.off[0], s)
		c.next(l)
	}
}

// copyRow sets d[i] = src[off+i*s].
func copyRow[T any](d, src []T, off, s int) {
	if s == 1 {
		copy(d, src[off:off+len(d)])
		return
	}
	for i := range d {
		d[i] = src[off]
		off += s
	}
}

// copyTransposed handles layouts whose last two dims (R, C) have source
// strides (1, s): each (R, C) matrix of dst is the transpose of a block of
// src whose columns are contiguous. Work items are (matrix, band of
// transposeTile rows).
func copyTransposed[T any](dst, src []T, off int, l *layout.Layout) {
	R, C := l.Shape[l.NDim-2], l.Shape[l.NDim-1]
	bands := (R + transposeTile - 1) / transposeTile
	items := (len(dst) / (R * C)) * bands
	if serial(len(dst), grainMem) {
		transposeItems(dst, src, off, l, 0, items)
		return
	}
	lc := *l
	ParallelFor(items, max(1, grainMem/(transposeTile*C)), func(lo, hi int) { transposeItems(dst, src, off, &lc, lo, hi) })
}

// transposeItems does work items [lo, hi) of copyTransposed.
func transposeItems[T any](dst, src []T, off int, l *layout.Layout, lo, hi int) {
	R, C := l.Shape[l.NDim-2], l.Shape[l.NDim-1]
	s := l.Strides[0][l.NDim-1]
	bands := (R + transposeTile - 1) / transposeTile
	// The matrices are indexed by the dims before the last two, which are
	// the rows of the layout with its last dim dropped.
	ml := *l
	ml.NDim--
	var c rowCursor
	m := lo / bands
	c.seek(&ml, m, off, 0)
	for it := lo; it < hi; it++ {
		if it/bands != m {
			m = it / bands
			c.next(&ml)
		}
		r0 := (it % bands) * transposeTile
		r1 := min(r0+transposeTile, R)
		base := m * R * C
		for c0 := 0; c0 < C; c0 += transposeTile {
			c1 := min(c0+transposeTile, C)
			for r := r0; r < r1; r++ {
				d := dst[base+r*C+c0 : base+r*C+c1]
				so := c.off[0] + r + c0*s
				for j := range d {
					d[j] = src[so]
					so += s
				}
			}
		}
	}
}

// Fill sets every element of dst to v, by doubling copies (memmove speed
// for any T).
func Fill[T any](dst []T, v T) {
	if len(dst) == 0 {
		return
	}
	dst[0] = v
	for i := 1; i < len(dst); i *= 2 {
		copy(dst[i:], dst[:i])
	}
}

// Arange sets dst[i] = start + i*step. Floats compute it in float64 and
// round once (no accumulated error); int32 wraps on overflow.
func Arange[T Number](dst []T, start, step T) {
	if isInt[T]() {
		v := start
		for i := range dst {
			dst[i] = v
			v += step
		}
		return
	}
	s, d := float64(start), float64(step)
	for i := range dst {
		dst[i] = T(s + float64(i)*d)
	}
}
