package tensor

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor/internal/layout"
)

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func contiguousStrides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

func isContiguous(shape, strides []int) bool {
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] != 1 && strides[i] != acc {
			return false
		}
		acc *= shape[i]
	}
	return true
}

func shapeEq(a, b []int) bool { return slices.Equal(a, b) }

// mergeDims is the layout the backends' strided primitives take (copies,
// binary ops): shape with one or two operands' strides, dims merged
// (internal/layout). It panics when more than layout.MaxDims dims remain.
func mergeDims(op string, shape []int, strides ...[]int) layout.Layout {
	l, ok := layout.Merge(shape, strides...)
	if !ok {
		fail(op, ErrShape, "shape %v with strides %v has more than %d dims that cannot be merged",
			slices.Clone(shape), slices.Clone(strides), layout.MaxDims)
	}
	return l
}

// BroadcastShapes returns the NumPy broadcast of shapes a and b.
func BroadcastShapes(a, b []int) ([]int, error) {
	out, problem := broadcast(a, b)
	if problem != "" {
		return nil, fmt.Errorf("%s: %w", problem, ErrShape)
	}
	return out, nil
}

// broadcast is BroadcastShapes for the ops, which wrap ErrShape
// themselves: the broadcast shape, or what prevents it.
func broadcast(a, b []int) (out []int, problem string) {
	n := max(len(a), len(b))
	out = make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da < 0 || db < 0:
			return nil, fmt.Sprintf("shapes %v and %v: negative dimension (dim %d: %d vs %d)", a, b, i, da, db)
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Sprintf("shapes %v and %v do not broadcast (dim %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, ""
}

// broadcastStrides gives t's strides for viewing it as shape (stride 0 on
// broadcast dimensions). shape must be a broadcast of t.shape.
func broadcastStrides(t *Tensor, shape []int) []int {
	n := len(shape)
	s := make([]int, n)
	for i := range n {
		j := len(t.shape) - n + i
		if j < 0 || t.shape[j] == 1 && shape[i] != 1 {
			s[i] = 0
		} else {
			s[i] = t.strides[j]
		}
	}
	return s
}
