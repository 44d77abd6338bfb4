package tensor

import (
	"fmt"
	"slices"
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

// BroadcastShapes returns the NumPy broadcast of shapes a and b.
func BroadcastShapes(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := len(a) - n + i; j >= 0 {
			da = a[j]
		}
		if j := len(b) - n + i; j >= 0 {
			db = b[j]
		}
		switch {
		case da == db, db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast (dim %d: %d vs %d): %w", a, b, i, da, db, ErrShape)
		}
	}
	return out, nil
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
