package cpukern

import (
	"fmt"
	"strconv"

	"github.com/strata-ml/strata/tensor/internal/layout"
)

// The strided kernels (Binary, CopyStrided) take a layout merged by
// package tensor (internal/layout): unit dims dropped, neighbours that
// are contiguous in every operand joined, at most layout.MaxDims dims, so
// index state lives in fixed arrays and nothing is allocated.

// checkView panics unless every element that operand o of l reaches from
// offset off lies inside a buffer of n elements. Negative strides are
// allowed.
func checkView(kernel, arg string, l *layout.Layout, o, n, off int) {
	lo, hi, ok := l.Span(o, off)
	if ok && (lo < 0 || hi >= n) {
		panic(fmt.Sprintf("cpukern.%s: %s view (offset %d, strides %s, shape %s) spans [%d, %d], outside its %d elements",
			kernel, arg, off, fmtInts(l.Strides[o][:l.NDim]), fmtInts(l.Shape[:l.NDim]), lo, hi, n))
	}
}

// fmtInts formats s like fmt's %v. Unlike passing s to fmt, it does not
// make s escape, so callers' shape and stride literals stay on the stack.
func fmtInts(s []int) string {
	b := []byte{'['}
	for i, v := range s {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return string(append(b, ']'))
}

// rowCursor walks the rows (all dims but the last) of a merged layout in
// row-major order, keeping both operands' row offsets. It does not keep
// the layout (storing a pointer through a pointer would move the caller's
// layout to the heap); pass the same one to each call.
type rowCursor struct {
	idx [layout.MaxDims]int
	off [2]int
}

// seek positions the cursor on row r, the base offsets being off0, off1.
func (c *rowCursor) seek(l *layout.Layout, r, off0, off1 int) {
	c.off = [2]int{off0, off1}
	for d := l.NDim - 2; d >= 0; d-- {
		i := r % l.Shape[d]
		r /= l.Shape[d]
		c.idx[d] = i
		c.off[0] += i * l.Strides[0][d]
		c.off[1] += i * l.Strides[1][d]
	}
}

// next advances to the following row of l.
func (c *rowCursor) next(l *layout.Layout) {
	for d := l.NDim - 2; d >= 0; d-- {
		c.idx[d]++
		c.off[0] += l.Strides[0][d]
		c.off[1] += l.Strides[1][d]
		if c.idx[d] < l.Shape[d] {
			return
		}
		c.off[0] -= c.idx[d] * l.Strides[0][d]
		c.off[1] -= c.idx[d] * l.Strides[1][d]
		c.idx[d] = 0
	}
}
