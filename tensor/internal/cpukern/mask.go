package cpukern

import (
	"fmt"
	"unsafe"
)

// CausalMask copies batch (rows x cols) matrices from src to dst, setting
// element (i, j) to fill where j > i + (cols - rows): query i (of the last
// rows positions) may attend to keys up to its own position. With rows ==
// cols this is the upper triangle above the diagonal. dst may be src
// itself. The backward of a mask with fill -Inf is the same call on the
// gradient with fill 0. It panics when a length is not batch*rows*cols or
// a size is negative.
func CausalMask[T Float](dst, src []T, batch, rows, cols int, fill T) {
	if batch < 0 || rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpukern.CausalMask: negative size (batch %d, rows %d, cols %d)", batch, rows, cols))
	}
	n := batch * rows * cols
	mustEq("CausalMask", "dst", len(dst), n)
	mustEq("CausalMask", "src", len(src), n)
	if n == 0 {
		return
	}
	same := unsafe.SliceData(dst) == unsafe.SliceData(src)
	total := batch * rows
	if serial(n, grainMem) {
		causalRows(dst, src, rows, cols, fill, same, 0, total)
		return
	}
	ParallelFor(total, max(1, grainMem/cols), func(lo, hi int) { causalRows(dst, src, rows, cols, fill, same, lo, hi) })
}

// causalRows handles matrix rows [lo, hi) counted across the batch.
func causalRows[T Float](dst, src []T, rows, cols int, fill T, same bool, lo, hi int) {
	for r := lo; r < hi; r++ {
		i := r % rows
		keep := min(max(i+cols-rows+1, 0), cols)
		d := dst[r*cols : (r+1)*cols]
		if !same {
			copy(d[:keep], src[r*cols:r*cols+keep])
		}
		m := d[keep:]
		for j := range m {
			m[j] = fill
		}
	}
}
