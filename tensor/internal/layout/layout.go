// Package layout merges the dims of strided operations. Package tensor
// computes one Layout per strided copy or broadcasting binary op and hands
// it to the backend, which runs it as it is: the CPU kernels
// (internal/cpukern) walk its rows, the CUDA backend encodes it as the
// kernels' Layout1 or Layout2 argument (kernels/common.cuh), provided it
// has at most 8 dims.
package layout

import "fmt"

// MaxDims is the most dims a merged layout holds (NumPy allows 32,
// PyTorch's TensorIterator 25). The arrays are fixed, so a Layout lives on
// the stack and the strided kernels allocate nothing.
const MaxDims = 16

// Layout is the shape of a contiguous row-major destination with the
// element strides of up to two source views (Strides[0], Strides[1]; 0
// for a missing second operand, and on broadcast dims), after merging:
// unit dims are dropped and neighbours that are contiguous with each other
// in every operand become one. A contiguous tensor becomes one dim, a bias
// add (rows, cols) with strides (cols, 1) and (0, 1). A 0-d or all-unit
// shape has NDim 0 (one element at the operands' offsets); a shape with a
// zero dim is the one dim 0.
type Layout struct {
	NDim    int
	Shape   [MaxDims]int
	Strides [2][MaxDims]int
}

// Merge returns the layout of shape with one or two operands' strides,
// each with one stride per dim of shape. ok is false when more than
// MaxDims dims remain. Negative strides are allowed.
func Merge(shape []int, strides ...[]int) (l Layout, ok bool) {
	k := len(strides)
	if k < 1 || k > 2 {
		panic(fmt.Sprintf("layout.Merge: %d operands, want 1 or 2", k))
	}
	for o, s := range strides {
		if len(s) != len(shape) {
			panic(fmt.Sprintf("layout.Merge: operand %d has %d strides for %d dims", o, len(s), len(shape)))
		}
	}
	// An empty shape is one dim of 0 whatever its other dims: look for a
	// zero before merging, or more than MaxDims dims inside the zero one
	// would report a shape that has nothing to reach as too deep.
	for _, size := range shape {
		if size == 0 {
			return Layout{NDim: 1}, true
		}
	}
	m := 0 // dims built so far, innermost first
	for d := len(shape) - 1; d >= 0; d-- {
		size := shape[d]
		if size == 1 {
			continue
		}
		if m > 0 {
			merge := true
			for o := range k {
				if strides[o][d] != l.Strides[o][m-1]*l.Shape[m-1] {
					merge = false
					break
				}
			}
			if merge {
				l.Shape[m-1] *= size
				continue
			}
		}
		if m == MaxDims {
			return Layout{}, false
		}
		l.Shape[m] = size
		for o := range k {
			l.Strides[o][m] = strides[o][d]
		}
		m++
	}
	for i, j := 0, m-1; i < j; i, j = i+1, j-1 {
		l.Shape[i], l.Shape[j] = l.Shape[j], l.Shape[i]
		for o := range l.Strides {
			l.Strides[o][i], l.Strides[o][j] = l.Strides[o][j], l.Strides[o][i]
		}
	}
	l.NDim = m
	return l, true
}

// Numel is the number of elements: the product of the shape.
func (l *Layout) Numel() int {
	n := 1
	for _, s := range l.Shape[:l.NDim] {
		n *= s
	}
	return n
}

// Contiguous reports whether each of the first k operands is one
// contiguous run (true for one element).
func (l *Layout) Contiguous(k int) bool {
	if l.NDim == 0 {
		return true
	}
	if l.NDim > 1 {
		return false
	}
	for o := range k {
		if l.Strides[o][0] != 1 {
			return false
		}
	}
	return true
}

// Transposed reports whether the two innermost dims of operand 0 are a
// transpose (inner stride not 1, next stride 1: x.T, or attention's (B, H,
// T, D) <-> (B, T, H, D) permutes), which copies go through in tiles.
func (l *Layout) Transposed() bool {
	n := l.NDim
	return n >= 2 && l.Strides[0][n-1] != 1 && l.Strides[0][n-2] == 1
}

// Span returns the lowest and highest element offsets operand o reaches
// from offset off; ok is false for an empty layout, which reaches none.
func (l *Layout) Span(o, off int) (lo, hi int, ok bool) {
	lo, hi = off, off
	for d, size := range l.Shape[:l.NDim] {
		if size == 0 {
			return 0, 0, false
		}
		if s := l.Strides[o][d]; s > 0 {
			hi += (size - 1) * s
		} else {
			lo += (size - 1) * s
		}
	}
	return lo, hi, true
}
