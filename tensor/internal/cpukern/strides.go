package cpukern

import (
	"fmt"
	"strconv"
)

// maxDims is the highest rank the strided kernels accept after
// coalescing (NumPy had 32, PyTorch's TensorIterator has 25). Index state
// lives in fixed arrays, so strided kernels allocate nothing.
const maxDims = 16

// layout is a shape with the strides of up to two source operands, the
// destination being contiguous. init drops unit dims and merges
// neighbours that are contiguous with each other in every operand, so a
// contiguous tensor becomes one dim and a bias add becomes (rows, cols).
type layout struct {
	ndim  int
	shape [maxDims]int
	str   [2][maxDims]int
}

// init coalesces shape with the operands' strides (one or two; a missing
// second operand gets zero strides). It returns false when the shape has
// a zero dim (nothing to do), and panics when more than maxDims dims
// remain.
func (l *layout) init(kernel string, shape []int, strides ...[]int) bool {
	k := len(strides)
	m := 0 // dims built so far, innermost first
	for d := len(shape) - 1; d >= 0; d-- {
		size := shape[d]
		if size == 0 {
			return false
		}
		if size == 1 {
			continue
		}
		if m > 0 {
			merge := true
			for o := 0; o < k; o++ {
				if strides[o][d] != l.str[o][m-1]*l.shape[m-1] {
					merge = false
					break
				}
			}
			if merge {
				l.shape[m-1] *= size
				continue
			}
		}
		if m == maxDims {
			panic(fmt.Sprintf("cpukern.%s: shape %s has more than %d dims that cannot be merged", kernel, fmtInts(shape), maxDims))
		}
		l.shape[m] = size
		for o := 0; o < 2; o++ {
			l.str[o][m] = 0
			if o < k {
				l.str[o][m] = strides[o][d]
			}
		}
		m++
	}
	for i, j := 0, m-1; i < j; i, j = i+1, j-1 {
		l.shape[i], l.shape[j] = l.shape[j], l.shape[i]
		for o := range l.str {
			l.str[o][i], l.str[o][j] = l.str[o][j], l.str[o][i]
		}
	}
	l.ndim = m
	return true
}

// checkView panics unless every element of the strided view (off,
// strides) over shape lies inside a buffer of length n. Negative strides
// are allowed.
func checkView(kernel, arg string, shape []int, n, off int, strides []int) {
	if len(strides) != len(shape) {
		panic(fmt.Sprintf("cpukern.%s: %s has %d strides for the %d-d shape %s", kernel, arg, len(strides), len(shape), fmtInts(shape)))
	}
	lo, hi := off, off
	for d, size := range shape {
		if size < 0 {
			panic(fmt.Sprintf("cpukern.%s: negative size in shape %s", kernel, fmtInts(shape)))
		}
		if size == 0 {
			return
		}
		if s := strides[d]; s > 0 {
			hi += (size - 1) * s
		} else {
			lo += (size - 1) * s
		}
	}
	if lo < 0 || hi >= n {
		panic(fmt.Sprintf("cpukern.%s: %s view (offset %d, strides %s, shape %s) spans [%d, %d], outside its %d elements",
			kernel, arg, off, fmtInts(strides), fmtInts(shape), lo, hi, n))
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

// numel is the product of shape.
func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// rowCursor walks the rows (all dims but the last) of a coalesced layout
// in row-major order, keeping both operands' row offsets. It does not
// keep the layout (storing a pointer through a pointer would move the
// caller's layout to the heap); pass the same one to each call.
type rowCursor struct {
	idx [maxDims]int
	off [2]int
}

// seek positions the cursor on row r, the base offsets being off0, off1.
func (c *rowCursor) seek(l *layout, r, off0, off1 int) {
	c.off = [2]int{off0, off1}
	for d := l.ndim - 2; d >= 0; d-- {
		i := r % l.shape[d]
		r /= l.shape[d]
		c.idx[d] = i
		c.off[0] += i * l.str[0][d]
		c.off[1] += i * l.str[1][d]
	}
}

// next advances to the following row of l.
func (c *rowCursor) next(l *layout) {
	for d := l.ndim - 2; d >= 0; d-- {
		c.idx[d]++
		c.off[0] += l.str[0][d]
		c.off[1] += l.str[1][d]
		if c.idx[d] < l.shape[d] {
			return
		}
		c.off[0] -= c.idx[d] * l.str[0][d]
		c.off[1] -= c.idx[d] * l.str[1][d]
		c.idx[d] = 0
	}
}
