package tensor

import (
	"slices"
)

// reduceAxes normalises and sorts axes (all axes when none are given).
func reduceAxes(op string, t *Tensor, axes []int) []int {
	if len(axes) == 0 {
		axes = make([]int, len(t.shape))
		for i := range axes {
			axes[i] = i
		}
		return axes
	}
	if len(t.shape) == 0 {
		// A scalar takes axis 0 (or -1) and reduces over nothing, as
		// PyTorch's torch.tensor(3.).sum(0).
		if len(axes) > 1 || axes[0] != 0 && axes[0] != -1 {
			fail(op, ErrShape, "axes %v out of range for a scalar (0 or -1, once)", axes)
		}
		return nil
	}
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = t.axis(op, a)
	}
	slices.Sort(out)
	if len(slices.Compact(slices.Clone(out))) != len(out) {
		fail(op, ErrShape, "repeated axis in %v", axes)
	}
	return out
}

// reduce applies a sum or max over axes, one axis at a time from the last.
func reduce(op string, t *Tensor, axes []int, keepDim, isMax bool) *Tensor {
	t.live(op)
	sameArith(op, t)
	axes = reduceAxes(op, t, axes)
	if isMax { // before anything is allocated
		for _, a := range axes {
			if t.shape[a] == 0 {
				fail(op, ErrShape, "max over empty axis %d of %v", a, t.shape)
			}
		}
	}
	if r := reducePermuted(op, t, axes, keepDim, isMax); r != nil {
		return r
	}
	c := ctxOf(op, t)
	cur, done := contig(t)
	owned := false
	// A pass that fails (out of memory) releases what the passes before
	// it made, and t's contiguous copy.
	defer func() {
		if r := recover(); r != nil {
			if owned {
				cur.Release()
			}
			done()
			panic(r)
		}
	}()
	shape := slices.Clone(t.shape)
	for i := len(axes) - 1; i >= 0; i-- {
		a := axes[i]
		outer, mid, inner := numel(shape[:a]), shape[a], numel(shape[a+1:])
		shape[a] = 1
		next := mustNew(op, c, t.dev, t.dtype, shape)
		func() {
			defer releaseOnPanic(next) // a kernel's scratch may fail (out of memory on a GPU)
			if isMax {
				t.dev.backend().reduceMax(next, cur, outer, mid, inner)
			} else {
				t.dev.backend().reduceSum(next, cur, outer, mid, inner, false)
			}
		}()
		if owned {
			cur.Release()
		} else {
			done()
		}
		cur, owned = next, true
	}
	if !owned { // no axes (scalar input): copy
		cur, owned = t.Clone(), true
		done()
	}
	if keepDim {
		return cur
	}
	out := make([]int, 0, len(shape))
	for i, d := range shape {
		if !slices.Contains(axes, i) {
			out = append(out, d)
		}
	}
	r := cur.Reshape(out...)
	cur.Release()
	return r
}

// Sum sums over the given axes (all when none), dropping them unless
// keepDim. Negative axes count from the end.
func Sum(t *Tensor, keepDim bool, axes ...int) *Tensor { return reduce("Sum", t, axes, keepDim, false) }

// Max takes the maximum over the given axes (all when none; negative axes
// count from the end), as Sum; a NaN in a reduced row makes its maximum
// NaN (torch.amax). An axis of size 0 is an *OpError wrapping ErrShape
// (the maximum of nothing is undefined, as in PyTorch).
func Max(t *Tensor, keepDim bool, axes ...int) *Tensor { return reduce("Max", t, axes, keepDim, true) }

// Mean averages over the given axes (all when none; negative axes count
// from the end), as Sum; the mean over an axis of size 0 is NaN, as in
// PyTorch (Sum gives 0 there). The sum is divided by the element count,
// as PyTorch divides it: a product with a rounded 1/n is an ulp off for
// many counts (the mean of seven 7s would be 7.0000005 in float32).
func Mean(t *Tensor, keepDim bool, axes ...int) *Tensor {
	s := reduce("Mean", t, axes, keepDim, false)
	defer releaseOnPanic(s)
	n := 1
	for _, a := range reduceAxes("Mean", t, axes) {
		n *= t.shape[a]
	}
	// s is a fresh contiguous tensor: divided in place by a scalar n.
	d := full("Mean", ctxOf("Mean", s), s.dev, s.dtype, float64(n))
	defer d.Release()
	s.dev.backend().binary(OpDiv, s, s, d, mergeDims("Mean", s.shape, s.strides, broadcastStrides(d, s.shape)))
	return s
}

// SumTo sums t down to shape, the inverse of broadcasting t from shape
// (used by the backward of broadcasting ops). Panics when t's shape is not
// a broadcast of shape.
func SumTo(t *Tensor, shape []int) *Tensor {
	t.live("SumTo")
	if shapeEq(t.shape, shape) {
		return t.Contiguous()
	}
	if b, err := BroadcastShapes(shape, t.shape); err != nil || !shapeEq(b, t.shape) {
		fail("SumTo", ErrShape, "%v is not a broadcast of %v", t.shape, shape)
	}
	lead := len(t.shape) - len(shape)
	var axes []int
	for i := range t.shape {
		if i < lead || shape[i-lead] == 1 && t.shape[i] != 1 {
			axes = append(axes, i)
		}
	}
	s := reduce("SumTo", t, axes, true, false)
	r := s.Reshape(shape...)
	s.Release()
	return r
}

// SumSquaresAll returns the sum of the squared elements of every tensor
// (float, on one device), as a float64 on the host: the squared global
// norm of a model's gradients. Half tensors (bf16 or fp16 gradients) count
// their exact values. On a GPU it waits for the device once, not once a
// tensor, its kernels reading half tensors as they are; on the CPU they
// are widened to float32 64 MiB at a time.
func SumSquaresAll(ts []*Tensor) float64 {
	op := "SumSquaresAll"
	if len(ts) == 0 {
		return 0
	}
	for _, t := range ts {
		t.live(op)
		sameFloat(op, t)
	}
	sameDevice(op, ts...)
	cs, release := contigAll(ts...)
	defer release()
	return ts[0].dev.backend().sumSquares(cs)
}

// SumSquares returns the sum of the squared elements, as a float64 on
// the host (used for gradient-norm clipping).
func SumSquares(t *Tensor) float64 {
	t.live("SumSquares")
	sameArith("SumSquares", t)
	c, done := contig(t)
	defer done()
	return t.dev.backend().sumSquares([]*Tensor{c})
}

// reducePermuted is reduce of t, a permutation of a contiguous tensor u
// (a transposed matrix: MatMulRowSums' sum over the rows of an output
// gradient's transpose), as the reduction of u over the matching axes,
// put back in t's order: where reduce would first copy all of t to make
// it contiguous, only the (smaller) result is permuted. nil when t is
// contiguous or no such permutation (its strides sorted) is.
func reducePermuted(op string, t *Tensor, axes []int, keepDim, isMax bool) *Tensor {
	if t.IsContiguous() || t.Rank() < 2 {
		return nil
	}
	order := make([]int, t.Rank()) // u's axes as t's: by decreasing stride
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return t.strides[b] - t.strides[a] })
	ushape, ustrides := make([]int, len(order)), make([]int, len(order))
	for j, a := range order {
		ushape[j], ustrides[j] = t.shape[a], t.strides[a]
	}
	if !isContiguous(ushape, ustrides) {
		return nil
	}
	inv := make([]int, len(order)) // t's axis a is u's axis inv[a]
	for j, a := range order {
		inv[a] = j
	}
	uaxes := make([]int, len(axes))
	for i, a := range axes {
		uaxes[i] = inv[a]
	}
	u := t.Permute(order...)
	defer u.Release()
	r := reduce(op, u, uaxes, true, isMax) // in u's order, reduced axes kept as 1
	defer r.Release()
	rt := r.Permute(inv...) // t's order
	defer rt.Release()
	out := rt.Contiguous()
	if keepDim {
		return out
	}
	shape := make([]int, 0, t.Rank())
	for i, d := range rt.shape {
		if !slices.Contains(axes, i) {
			shape = append(shape, d)
		}
	}
	defer out.Release()
	return out.Reshape(shape...)
}
