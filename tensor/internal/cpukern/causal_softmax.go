package cpukern

import "fmt"

// CausalSoftmax is Softmax(CausalMask(src, -Inf)) in one pass over batch
// (rows x cols) matrices, rows <= cols: row i of a matrix takes the softmax
// of its first n = i + 1 + cols - rows elements (the positions the mask
// keeps) and is zero after them, even where those n come out NaN (+Inf or
// NaN among them, or all -Inf), which the chain makes NaN throughout. It never reads the masked elements, and
// writes the result once instead of masking then normalising. dst may be
// src itself. It panics when a length is not batch*rows*cols, a size is
// negative or rows > cols (a query row would keep nothing).
func CausalSoftmax[T Float](dst, src []T, batch, rows, cols int) {
	n := checkCausal("CausalSoftmax", batch, rows, cols, len(dst), len(src))
	if n == 0 {
		return
	}
	total := batch * rows
	if serial(n, grainRow) {
		causalSoftmaxRows(dst, src, rows, cols, 0, total)
		return
	}
	ParallelFor(total, rowGrain(cols), func(lo, hi int) { causalSoftmaxRows(dst, src, rows, cols, lo, hi) })
}

func causalSoftmaxRows[T Float](dst, src []T, rows, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		keep := r%rows + 1 + cols - rows
		d := dst[r*cols : (r+1)*cols]
		softmaxRow(d[:keep], src[r*cols:r*cols+keep])
		clear(d[keep:])
	}
}

// CausalSoftmaxBackward is SoftmaxBackward for CausalSoftmax's output y:
// dx = y * (dy - sum(dy*y)) over the kept positions of each row, zero at
// the masked ones (which the forward never read). dx may be dy itself.
func CausalSoftmaxBackward[T Float](dx, y, dy []T, batch, rows, cols int) {
	n := checkCausal("CausalSoftmaxBackward", batch, rows, cols, len(dx), len(y), len(dy))
	if n == 0 {
		return
	}
	total := batch * rows
	if serial(n, grainRow) {
		causalSoftmaxBackwardRows(dx, y, dy, rows, cols, 0, total)
		return
	}
	ParallelFor(total, rowGrain(cols), func(lo, hi int) { causalSoftmaxBackwardRows(dx, y, dy, rows, cols, lo, hi) })
}

func causalSoftmaxBackwardRows[T Float](dx, y, dy []T, rows, cols, lo, hi int) {
	for r := lo; r < hi; r++ {
		keep := r%rows + 1 + cols - rows
		o := r * cols
		d := dx[o : o+cols]
		softmaxBackwardRow(d[:keep], y[o:o+keep], dy[o:o+keep])
		clear(d[keep:])
	}
}

// checkCausal validates a causal row kernel's sizes (the lengths as the
// row kernels' checkRows does, over batch*rows rows) and returns the
// element count.
func checkCausal(kernel string, batch, rows, cols int, lens ...int) int {
	if batch < 0 || rows < 0 || cols < 0 {
		panic(fmt.Sprintf("cpukern.%s: negative size (batch %d, rows %d, cols %d)", kernel, batch, rows, cols))
	}
	if rows > cols {
		panic(fmt.Sprintf("cpukern.%s: %d query rows over %d key columns: the first rows would keep nothing", kernel, rows, cols))
	}
	checkRows(kernel, batch*rows, cols, lens...)
	return batch * rows * cols
}
