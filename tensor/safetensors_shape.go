package tensor

import (
	"fmt"
	"math"
)

// SafetensorsShape converts a safetensors header's shape (JSON natural
// numbers, read as uint64) to a tensor shape, or returns an error wrapping
// ErrShape that gives the dimension as the file wrote it when it does not
// fit in an int (2^63 or more on 64-bit machines: converted as it is, it
// would read as a negative number). A header may give such a dimension
// beside a 0: the element and byte counts (0) check out, so the format's
// own checks pass it. The shape's other limits (its element count, and its
// nonzero dimensions' product) are the new tensor's (FromBytes). For
// readers of such files outside this package too (nn's weights loader).
func SafetensorsShape(shape []uint64) ([]int, error) {
	out := make([]int, len(shape))
	for i, d := range shape {
		if d > math.MaxInt {
			return nil, fmt.Errorf("shape %v: dimension %d is %d, more than an int holds (at most %d): %w", shape, i, d, math.MaxInt, ErrShape)
		}
		out[i] = int(d)
	}
	return out, nil
}
