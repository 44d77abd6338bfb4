package tensor

import "github.com/strata-ml/strata/tensor/internal/layout"

// backend is the op surface every device implements. The exported ops
// validate shapes, dtypes and devices, allocate outputs and reduce every
// call to one of these primitives. Unless a method says otherwise, its
// tensors are contiguous, on the backend's device, of one float dtype, and
// their sizes agree; ids and targets are Int32.
type backend interface {
	upload(dst *Tensor, src []byte)
	download(dst []byte, src *Tensor)
	// copyStrided gathers src (any strides) into contiguous dst of the
	// same shape and dtype; l is their merged layout (mergeDims).
	copyStrided(dst, src *Tensor, l layout.Layout)
	// copy2D copies rows blocks of width elements from src (row stride
	// srcStride, starting at element srcOff) to dst (dstStride, dstOff);
	// both contiguous tensors of one dtype, offsets relative to their views.
	copy2D(dst, src *Tensor, rows, width, dstStride, dstOff, srcStride, srcOff int)
	fill(dst *Tensor, v float64)
	// cast converts between any two dtypes.
	cast(dst, src *Tensor)
	unary(op UnaryOp, dst, src *Tensor)
	// unaryTo: dst (float16 or bfloat16) = op(src (float32)), rounded
	// as cast rounds.
	unaryTo(op UnaryOp, dst, src *Tensor)
	// unaryBackward: dx = dy * op'(x); x or y is nil when op does not need it.
	unaryBackward(op UnaryOp, dx, x, y, dy *Tensor)
	// unaryBackwardTo: unaryBackward computed in float32 and stored in dx
	// (float16 or bfloat16), rounded as cast rounds.
	unaryBackwardTo(op UnaryOp, dx, x, y, dy *Tensor)
	// affine: dst = alpha*src + beta.
	affine(dst, src *Tensor, alpha, beta float64)
	// binary: dst (contiguous) = a op b over the merged layout l of dst's
	// shape with a's and b's strides broadcast to it (stride 0 on
	// broadcast dims); a and b give the storage, offset and dtype.
	binary(op BinaryOp, dst, a, b *Tensor, l layout.Layout)
	// reduce sums (or maxes) the middle of the (outer, mid, inner) view of
	// src into dst (outer, inner).
	reduceSum(dst, src *Tensor, outer, mid, inner int, accumulate bool)
	reduceMax(dst, src *Tensor, outer, mid, inner int)
	sumSquares(srcs []*Tensor) float64 // contiguous, one device, half tensors too; the total
	// matmul: for each of batch matrices, C = alpha*op(A)*op(B) + beta*C
	// with element strides between matrices (0 broadcasts one matrix). A
	// and B share a dtype; C has it too, or is float32 for half A and B
	// (float32 accumulation in every case). tf32 lets float32 products use
	// TF32 tensor cores where the device has them.
	matmul(c, a, b *Tensor, transA, transB bool, m, n, k, batch, strideA, strideB int, alpha, beta float64, tf32 bool)
	// matmulEpilogue is one 2-D product C = op(A) op(B) (alpha 1, beta 0)
	// with epi fused into it (vec: the bias, or the row sums it writes);
	// false when the backend has no such kernel for these operands, and
	// then it has done nothing.
	matmulEpilogue(c, a, b, vec *Tensor, transA, transB bool, m, n, k int, epi epilogue, tf32 bool) bool
	softmax(dst, src *Tensor, rows, cols int, log bool)
	softmaxBackward(dx, y, dy *Tensor, rows, cols int, log bool)
	// causalSoftmax and its backward: softmax over the rows of batch
	// (rows x cols) matrices kept by the causal mask (rows <= cols), zero
	// at the masked positions.
	causalSoftmax(dst, src *Tensor, batch, rows, cols int)
	causalSoftmaxBackward(dx, y, dy *Tensor, batch, rows, cols int)
	causalMask(dst, src *Tensor, batch, rows, cols int, fill float64)
	// layerNorm: y, mean and rstd of x; y may also be float16 or bfloat16
	// for float32 x (rounded as cast rounds; LayerNormTo).
	layerNorm(y, mean, rstd, x, w, b *Tensor, rows, cols int, eps float64)
	// layerNormBackward writes dx and, where not nil, dw and db (their
	// previous contents are not read: the op allocates them without a
	// zero fill).
	layerNormBackward(dx, dw, db, dy, x, mean, rstd, w *Tensor, rows, cols int)
	gather(dst, table, ids *Tensor, dim, rows int) error
	scatterAdd(dtable, dout, ids *Tensor, dim, rows int) error
	crossEntropy(loss, logits, targets *Tensor, rows, cols, ld int, ignore int32) (int, error)
	crossEntropyBackward(dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32)
	// crossEntropyFused is crossEntropy's loss and crossEntropyBackward's
	// gradient at once, the gradient in dlogits' dtype (that of the
	// logits, or float16 or bfloat16 for float32 logits); half logits are
	// widened as read, with a float32 loss and dloss. It counts nothing
	// and reports bad targets as crossEntropyBackward does.
	crossEntropyFused(loss, dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32)
	// countTargets counts the rows whose target is not ignore. A GPU
	// waits for the device, and returns the bad target an earlier
	// cross-entropy kernel reported as the error.
	countTargets(targets *Tensor, rows int, ignore int32) (int, error)
	// meanDivisor writes n into the scalar dst (float32 or float64), n
	// the rows whose target is not ignore (1 when there are none), without
	// waiting for the device.
	meanDivisor(dst, targets *Tensor, rows int, ignore int32)
	dropout(dst, src *Tensor, p float64, seed, offset uint64)
	adamw(p, g, m, v *Tensor, lr, beta1, beta2, eps, wd float64, step int)
	// adamwMulti is adamw over many parameters of one dtype at once, wd[i]
	// the weight decay of ps[i]; a float32 parameter's gradient may be
	// half (bf16 or fp16).
	adamwMulti(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int)
	sgd(p, g, buf *Tensor, lr, momentum, wd float64, nesterov bool)
}
