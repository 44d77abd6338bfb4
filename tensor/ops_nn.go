package tensor

import (
	"math"
	"slices"
)

// rowsCols views t as (rows, cols) over its last axis.
func rowsCols(t *Tensor) (int, int) {
	if t.Rank() == 0 {
		return 1, 1
	}
	c := t.shape[len(t.shape)-1]
	if c == 0 {
		return 0, 0
	}
	return t.Numel() / c, c
}

// normRowsCols is rowsCols for the norms, whose rows of 0 elements
// still count: x (3, 0) is 3 rows of 0 (each has its mean and rstd).
func normRowsCols(x *Tensor) (int, int) {
	if x.Rank() > 0 && x.shape[x.Rank()-1] == 0 {
		return numel(x.shape[:x.Rank()-1]), 0
	}
	return rowsCols(x)
}

// Softmax over the last axis.
func Softmax(t *Tensor) *Tensor { return softmax("Softmax", t, false) }

// LogSoftmax over the last axis.
func LogSoftmax(t *Tensor) *Tensor { return softmax("LogSoftmax", t, true) }

func softmax(op string, t *Tensor, log bool) *Tensor {
	t.live(op)
	sameArith(op, t)
	src, done := contig(t)
	defer done()
	out := mustNew(op, ctxOf(op, t), t.dev, t.dtype, t.shape)
	r, c := rowsCols(t)
	t.dev.backend().softmax(out, src, r, c, log)
	return out
}

// SoftmaxBackward returns the input gradient of Softmax (log false) or
// LogSoftmax (log true) from its output y and output gradient dy.
func SoftmaxBackward(y, dy *Tensor, log bool) *Tensor {
	op := "SoftmaxBackward"
	cy, cdy, release := outputAndGrad(op, y, dy)
	defer release()
	out := mustNew(op, ctxOf(op, y, dy), y.dev, y.dtype, y.shape)
	r, c := rowsCols(y)
	y.dev.backend().softmaxBackward(out, cy, cdy, r, c, log)
	return out
}

// CausalSoftmax is Softmax(CausalMask(t, NegInf)) in one pass: the
// softmax over the last axis of t (..., T1, T2), T1 <= T2, of the positions
// j <= i + T2 - T1 only, zero at the others. It never reads the masked
// scores and writes its output once, where the unfused chain writes a
// masked copy (or masks in place) and then reads it all again. Its
// backward is CausalSoftmaxBackward. It equals the chain wherever a row's
// kept scores are finite or some of them -Inf (not all): a row whose kept
// scores hold +Inf or NaN, or are all -Inf, comes out NaN at the kept
// positions and still 0 at the masked ones, where the chain (as PyTorch's
// softmax of a masked_fill) makes the whole row NaN.
func CausalSoftmax(t *Tensor) *Tensor {
	op := "CausalSoftmax"
	t.live(op)
	sameArith(op, t)
	batch, rows, cols := causalShape(op, t)
	src, done := contig(t)
	defer done()
	out := mustNew(op, ctxOf(op, t), t.dev, t.dtype, t.shape)
	if out.Numel() > 0 {
		t.dev.backend().causalSoftmax(out, src, batch, rows, cols)
	}
	return out
}

// CausalSoftmaxBackward returns the input gradient of CausalSoftmax from
// its output y and output gradient dy: SoftmaxBackward over the kept
// positions, zero at the masked ones.
func CausalSoftmaxBackward(y, dy *Tensor) *Tensor {
	op := "CausalSoftmaxBackward"
	cy, cdy, release := outputAndGrad(op, y, dy)
	defer release()
	batch, rows, cols := causalShape(op, y)
	out := mustNew(op, ctxOf(op, y, dy), y.dev, y.dtype, y.shape)
	if out.Numel() > 0 {
		y.dev.backend().causalSoftmaxBackward(out, cy, cdy, batch, rows, cols)
	}
	return out
}

// outputAndGrad checks a backward op's forward output y and output
// gradient dy (one device, a float dtype, one shape) and returns them
// contiguous, with the function that releases the copies it made.
func outputAndGrad(op string, y, dy *Tensor) (cy, cdy *Tensor, release func()) {
	sameDevice(op, y, dy)
	sameArith(op, y, dy)
	if !shapeEq(y.shape, dy.shape) {
		fail(op, ErrShape, "y %v, dy %v", y.shape, dy.shape)
	}
	cs, release := contigAll(y, dy)
	return cs[0], cs[1], release
}

// causalShape splits t (..., T1, T2) into (batch, T1, T2) for the causal
// kernels, which need T1 <= T2: with more queries than keys the first
// query rows would keep no key at all.
func causalShape(op string, t *Tensor) (batch, rows, cols int) {
	if t.Rank() < 2 {
		fail(op, ErrShape, "want at least 2-D (..., queries, keys), got %v", t.shape)
	}
	rows, cols = t.shape[t.Rank()-2], t.shape[t.Rank()-1]
	if rows > cols {
		fail(op, ErrShape, "%v has %d query rows over %d keys: the causal mask would leave the first rows nothing", t.shape, rows, cols)
	}
	if rows == 0 {
		return 0, 0, cols
	}
	return t.Numel() / (rows * cols), rows, cols
}

// CausalMask returns t (..., T1, T2) with element (i, j) set to fill where
// j > i + T2 - T1 (future positions). Use -Inf before a softmax; its
// backward is CausalMask(dy, 0).
func CausalMask(t *Tensor, fill float64) *Tensor {
	op := "CausalMask"
	t.live(op)
	sameArith(op, t)
	if t.Rank() < 2 {
		fail(op, ErrShape, "want at least 2-D, got %v", t.shape)
	}
	src, done := contig(t)
	defer done()
	out := mustNew(op, ctxOf(op, t), t.dev, t.dtype, t.shape)
	r, c := t.shape[t.Rank()-2], t.shape[t.Rank()-1]
	if r*c > 0 {
		t.dev.backend().causalMask(out, src, t.Numel()/(r*c), r, c, fill)
	}
	return out
}

// NegInf is -∞, the usual CausalMask fill.
var NegInf = math.Inf(-1)

// LayerNorm normalises x over its last axis and applies the optional
// affine weight w and bias b (shape [C]). It also returns the per-row mean
// and reciprocal standard deviation, which LayerNormBackward needs. Rows
// of C = 0 elements give an empty y, mean 0 and rstd NaN, as PyTorch's
// native_layer_norm.
func LayerNorm(x, w, b *Tensor, eps float64) (y, mean, rstd *Tensor) {
	x.live("LayerNorm")
	return LayerNormTo(x, w, b, eps, x.dtype)
}

// LayerNormTo is LayerNorm with y in dtype dt: x's own, or float16 or
// bfloat16 for float32 x, computed in float32 and rounded once as Cast
// rounds (the same bits as LayerNorm then To, without the float32 y: a
// norm whose output feeds only half-precision products). mean and rstd
// are in x's dtype.
func LayerNormTo(x, w, b *Tensor, eps float64, dt DType) (y, mean, rstd *Tensor) {
	op := "LayerNorm"
	x.live(op)
	if dt != x.dtype && (x.dtype != Float32 || !dt.IsHalf()) {
		fail(op, ErrDType, "output in %v for %v input: want float32 to float16 or bfloat16", dt, x.dtype)
	}
	ts := []*Tensor{x}
	rows, cols := normRowsCols(x)
	for _, p := range []*Tensor{w, b} {
		if p != nil {
			if p.Rank() != 1 || p.shape[0] != cols {
				fail(op, ErrShape, "weight/bias %v for input %v: want [%d]", p.shape, x.shape, cols)
			}
			ts = append(ts, p)
		}
	}
	sameDevice(op, ts...)
	sameArith(op, ts...)
	cs, release := contigAll(x, w, b)
	defer release()
	c := ctxOf(op, x, w, b)
	// Each output is released when a later allocation or the backend
	// fails (out of memory, a refused launch): nothing is left behind.
	y = mustNew(op, c, x.dev, dt, x.shape)
	defer releaseOnPanic(y)
	mean = mustNew(op, c, x.dev, x.dtype, []int{rows})
	defer releaseOnPanic(mean)
	rstd = mustNew(op, c, x.dev, x.dtype, []int{rows})
	defer releaseOnPanic(rstd)
	if cols == 0 {
		// Rows of no elements, as PyTorch's native_layer_norm takes them:
		// y is empty, each row's mean 0 and its rstd NaN (a variance of
		// 0/0), as other reductions over an empty axis give their values.
		mean.Fill(0)
		rstd.Fill(math.NaN())
		return y, mean, rstd
	}
	x.dev.backend().layerNorm(y, mean, rstd, cs[0], cs[1], cs[2], rows, cols, eps)
	return y, mean, rstd
}

// LayerNormBackward returns dx and, when w is not nil, dw and db.
func LayerNormBackward(dy, x, mean, rstd, w *Tensor, withBias bool) (dx, dw, db *Tensor) {
	op := "LayerNormBackward"
	ts := []*Tensor{dy, x, mean, rstd}
	if w != nil {
		ts = append(ts, w)
	}
	sameDevice(op, ts...)
	sameArith(op, ts...)
	rows, cols := normRowsCols(x)
	if !shapeEq(dy.shape, x.shape) || mean.Numel() != rows || rstd.Numel() != rows {
		fail(op, ErrShape, "dy %v, x %v, mean %v, rstd %v", dy.shape, x.shape, mean.shape, rstd.shape)
	}
	if w != nil && (w.Rank() != 1 || w.shape[0] != cols) {
		fail(op, ErrShape, "weight %v for input %v: want [%d]", w.shape, x.shape, cols)
	}
	cs, release := contigAll(dy, x, mean, rstd, w)
	defer release()
	cdy, cx, cmean, crstd, cw := cs[0], cs[1], cs[2], cs[3], cs[4]
	c := ctxOf(op, dy, x, mean, rstd, w)
	dx = mustNew(op, c, x.dev, x.dtype, x.shape)
	defer releaseOnPanic(dx) // as LayerNorm's outputs
	// dw and db are written whole by the backend: no zero fill (a launch
	// each on a GPU).
	if w != nil {
		dw = mustNew(op, c, x.dev, x.dtype, []int{cols})
		defer releaseOnPanic(dw)
		if withBias {
			db = mustNew(op, c, x.dev, x.dtype, []int{cols})
			defer releaseOnPanic(db)
		}
	}
	if cols > 0 { // rows of 0 elements: dx, dw and db are empty
		x.dev.backend().layerNormBackward(dx, dw, db, cdy, cx, cmean, crstd, cw, rows, cols)
	}
	return dx, dw, db
}

// Embedding gathers rows of table (V, D) for int32 ids of any shape; the
// result has shape ids.shape + [D]. Panics with ErrArgument naming the
// offending id when one is out of range.
func Embedding(table, ids *Tensor) *Tensor {
	op := "Embedding"
	sameDevice(op, table, ids)
	indices(op, "ids", ids)
	if table.Rank() != 2 {
		fail(op, ErrShape, "table %v: want 2-D", table.shape)
	}
	cs, release := contigAll(table, ids)
	defer release()
	ct, ci := cs[0], cs[1]
	out := mustNew(op, ctxOf(op, table, ids), table.dev, table.dtype, append(ids.Shape(), table.shape[1]))
	if err := table.dev.backend().gather(out, ct, ci, table.shape[1], table.shape[0]); err != nil {
		out.Release()
		fail(op, ErrArgument, "%s", kernelFault(err))
	}
	return out
}

// EmbeddingBackward returns the table gradient (rows, D): dout's rows
// scatter-added at ids. dout has Embedding's output shape, ids.shape +
// [D] (ErrShape otherwise, naming both shapes).
func EmbeddingBackward(ids, dout *Tensor, rows int) *Tensor {
	op := "EmbeddingBackward"
	d := embeddingBackwardCheck(op, ids, dout, rows)
	out := full(op, ctxOf(op, dout, ids), dout.dev, dout.dtype, 0, rows, d)
	defer releaseOnPanic(out) // also a backend's refusal (CUDA: more than 2^32 ids) or failed scratch
	embeddingScatter(op, out, ids, dout, rows, d, out.Release)
	return out
}

// EmbeddingBackwardInto adds dout's rows into dtable (rows, D) at ids, in
// place: EmbeddingBackward without the (rows, D) result, for a gradient
// that already holds other contributions (a tied embedding's, whose output
// head gave it first). Each row gets its contributions in the order of
// ids, after what it held. dtable must be contiguous, of dout's dtype and
// device. dout may view dtable's storage: its values from before the op
// are added.
func EmbeddingBackwardInto(dtable, ids, dout *Tensor) {
	op := "EmbeddingBackwardInto"
	dtable.live(op)
	sameDevice(op, dtable, dout)
	sameArith(op, dout, dtable)
	if dtable.Rank() != 2 || !dtable.IsContiguous() {
		fail(op, ErrShape, "dtable %v (contiguous %t) for dout %v: want a contiguous (rows, D) table", dtable.shape, dtable.IsContiguous(), dout.shape)
	}
	rows := dtable.shape[0]
	if d := embeddingBackwardCheck(op, ids, dout, rows); d != dtable.shape[1] {
		fail(op, ErrShape, "dtable %v for dout %v: want %d columns", dtable.shape, dout.shape, d)
	}
	modified(dtable)
	embeddingScatter(op, dtable, ids, dout, rows, dtable.shape[1], func() {})
}

// embeddingBackwardCheck checks EmbeddingBackward's arguments and returns
// D, dout's last dimension.
func embeddingBackwardCheck(op string, ids, dout *Tensor, rows int) int {
	sameDevice(op, ids, dout)
	indices(op, "ids", ids)
	sameArith(op, dout)
	if dout.Rank() == 0 || rows < 0 {
		fail(op, ErrShape, "dout %v, %d rows: want dout (..., D) and rows >= 0", dout.shape, rows)
	}
	d := dout.shape[dout.Rank()-1]
	if !slices.Equal(dout.shape[:dout.Rank()-1], ids.shape) {
		fail(op, ErrShape, "dout %v for ids %v: want ids' shape + [D], %v", dout.shape, ids.shape, append(ids.Shape(), d))
	}
	return d
}

// embeddingScatter adds dout's rows into dtable at ids; a bad id calls
// undo (releasing what the caller made) and fails. A dout that views
// dtable's storage is added as it was before the op (a copy: the kernel
// would read rows it has already added to).
func embeddingScatter(op string, dtable, ids, dout *Tensor, rows, d int, undo func()) {
	cs, release := contigAll(dout, ids)
	defer release()
	src := cs[0]
	if src.SharesStorage(dtable) {
		src = src.Clone()
		defer src.Release()
	}
	if err := dout.dev.backend().scatterAdd(dtable, src, cs[1], d, rows); err != nil {
		undo()
		fail(op, ErrArgument, "%s", kernelFault(err))
	}
}

// CrossEntropy returns the per-row losses of logits (N, C) against int32
// targets (N) and the number of rows counted (targets equal to ignore
// have loss 0 and are not counted). Panics with ErrArgument naming the row
// when a target is out of range.
func CrossEntropy(logits, targets *Tensor, ignore int32) (*Tensor, int) {
	return crossEntropy("CrossEntropy", logits, -1, targets, ignore)
}

// CrossEntropyPadded is CrossEntropy over the first classes columns of
// logits (N, W), W >= classes: the other W - classes columns of each row
// are padding that the loss never reads. A GEMM writes logits of a
// vocabulary like GPT-2's 50,257 tokens fastest with rows padded to a
// multiple of 8 or 64 elements (aligned tensor-core tiles); see
// autograd.LinearCrossEntropy.
func CrossEntropyPadded(logits *Tensor, classes int, targets *Tensor, ignore int32) (*Tensor, int) {
	return crossEntropy("CrossEntropyPadded", logits, classes, targets, ignore)
}

// crossEntropy is CrossEntropy over the first classes columns (-1: all).
func crossEntropy(op string, logits *Tensor, classes int, targets *Tensor, ignore int32) (*Tensor, int) {
	sameDevice(op, logits, targets)
	sameArith(op, logits)
	indices(op, "targets", targets)
	crossEntropyShapes(op, logits, targets, nil)
	ld := logits.shape[1]
	classes = paddedClasses(op, classes, ld)
	cs, release := contigAll(logits, targets)
	defer release()
	cl, ct := cs[0], cs[1]
	loss := mustNew(op, ctxOf(op, logits, targets), logits.dev, logits.dtype, []int{logits.shape[0]})
	n, err := logits.dev.backend().crossEntropy(loss, cl, ct, logits.shape[0], classes, ld, ignore)
	if err != nil {
		loss.Release()
		fail(op, ErrArgument, "%s", kernelFault(err))
	}
	return loss, n
}

// crossEntropyShapes checks logits (N, W) against targets (N), and
// against dloss (N) where it is not nil (the gradient of the N losses), as
// PyTorch's cross_entropy takes logits (N, C): targets of N elements in
// another shape ((N, 1), or a (B, T) batch of (B*T, C) logits) are
// refused, not read as N targets.
func crossEntropyShapes(op string, logits, targets, dloss *Tensor) {
	ok := logits.Rank() == 2 && shapeEq(targets.shape, logits.shape[:1])
	if dloss == nil {
		if !ok {
			fail(op, ErrShape, "logits %v, targets %v: want logits (N, C) and targets (N)", logits.shape, targets.shape)
		}
		return
	}
	if !ok || !shapeEq(dloss.shape, logits.shape[:1]) {
		fail(op, ErrShape, "logits %v, targets %v, dloss %v: want logits (N, C), targets (N) and dloss (N)", logits.shape, targets.shape, dloss.shape)
	}
}

// paddedClasses checks a class count against the row width ld (-1: all).
// Other negative counts are refused, not read as -1: a count computed
// wrong would take the padding for classes.
func paddedClasses(op string, classes, ld int) int {
	if classes == -1 {
		return ld
	}
	if classes <= 0 || classes > ld {
		fail(op, ErrShape, "%d classes in rows of %d logits: want 1 to %d (or -1 for all)", classes, ld, ld)
	}
	return classes
}

// CrossEntropyBackward returns dlogits = (softmax(logits) - onehot) *
// dloss[row], recomputing the softmax instead of keeping it.
func CrossEntropyBackward(logits, targets, dloss *Tensor, ignore int32) *Tensor {
	return crossEntropyBackward("CrossEntropyBackward", logits, -1, targets, dloss, ignore)
}

// CrossEntropyPaddedBackward is CrossEntropyBackward of
// CrossEntropyPadded: the gradient has logits' padded shape (N, W), with
// zeros in the padding, so it can enter the next GEMMs as it is.
func CrossEntropyPaddedBackward(logits *Tensor, classes int, targets, dloss *Tensor, ignore int32) *Tensor {
	return crossEntropyBackward("CrossEntropyPaddedBackward", logits, classes, targets, dloss, ignore)
}

func crossEntropyBackward(op string, logits *Tensor, classes int, targets, dloss *Tensor, ignore int32) *Tensor {
	sameDevice(op, logits, targets, dloss)
	sameArith(op, logits, dloss)
	indices(op, "targets", targets)
	crossEntropyShapes(op, logits, targets, dloss)
	ld := logits.shape[1]
	classes = paddedClasses(op, classes, ld)
	cs, release := contigAll(logits, targets, dloss)
	defer release()
	cl, ct, cd := cs[0], cs[1], cs[2]
	out := mustNew(op, ctxOf(op, logits, targets, dloss), logits.dev, logits.dtype, logits.shape)
	defer releaseOnPanic(out) // a target out of range (on the CPU)
	logits.dev.backend().crossEntropyBackward(out, cl, ct, cd, logits.shape[0], classes, ld, ignore)
	return out
}

// CrossEntropyFused is CrossEntropyPadded and CrossEntropyPaddedBackward
// of the same logits at once (classes -1: every column): the loss of each
// row, and the gradient (softmax - onehot) * dloss[row] in dtype grad,
// zero in the padding columns. grad is the logits' dtype, or float16 or
// bfloat16 for float32 logits: the dtype of the products that take the
// gradient next (under autocast), rounded as Cast rounds, so that no
// float32 gradient is written and cast. Logits may also be float16 or
// bfloat16 (a half-precision head product, as PyTorch's autocast makes
// them): they are widened as they are read, the loss and dloss are
// float32 and the gradient is in their half type. On a GPU it is one
// kernel that reads each row twice, and it does not wait for the device:
// it does not count the rows (CountTargets does, once for many calls),
// and a target out of range is raised at the next synchronization (on the
// CPU at once), its row's loss and gradient zero.
func CrossEntropyFused(logits *Tensor, classes int, targets, dloss *Tensor, ignore int32, grad DType) (loss, dlogits *Tensor) {
	op := "CrossEntropyFused"
	sameDevice(op, logits, targets, dloss)
	if logits.dtype.IsHalf() {
		if dloss.dtype != Float32 {
			fail(op, ErrDType, "dloss %v for %v logits: want float32", dloss.dtype, logits.dtype)
		}
	} else {
		sameArith(op, logits, dloss)
	}
	indices(op, "targets", targets)
	crossEntropyShapes(op, logits, targets, dloss)
	if !(grad == logits.dtype || (logits.dtype == Float32 && grad.IsHalf())) {
		fail(op, ErrDType, "a %v gradient of %v logits: want the logits' dtype, or float16 or bfloat16 for float32 logits", grad, logits.dtype)
	}
	ld := logits.shape[1]
	classes = paddedClasses(op, classes, ld)
	cs, release := contigAll(logits, targets, dloss)
	defer release()
	ctx := ctxOf(op, logits, targets, dloss)
	loss = mustNew(op, ctx, logits.dev, AccumDType(logits.dtype), []int{logits.shape[0]})
	defer releaseOnPanic(loss) // also when dlogits cannot be allocated
	dlogits = mustNew(op, ctx, logits.dev, grad, logits.shape)
	defer releaseOnPanic(dlogits) // a target out of range (on the CPU)
	logits.dev.backend().crossEntropyFused(loss, dlogits, cs[0], cs[1], cs[2], logits.shape[0], classes, ld, ignore)
	return loss, dlogits
}

// CountTargets returns how many of targets (Int32, any shape) are not
// ignore: the divisor of a mean cross-entropy. On a GPU it waits for the
// device, and a target out of range that CrossEntropyFused or
// CrossEntropyPaddedBackward met since the last synchronization fails it
// (ErrArgument), as CrossEntropy fails.
func CountTargets(targets *Tensor, ignore int32) int {
	op := "CountTargets"
	targets.live(op)
	indices(op, "targets", targets)
	c, release := contigAll(targets)
	defer release()
	n, err := targets.dev.backend().countTargets(c[0], targets.Numel(), ignore)
	if err != nil {
		fail(op, ErrArgument, "%s", kernelFault(err))
	}
	return n
}

// MeanDivisor returns, as a scalar of dtype dt (float32 or float64) on
// targets' device, the number n of targets (int32, any shape) that are
// not ignore, or 1 when there are none: the divisor of a mean
// cross-entropy (PyTorch divides the sum by the count; an empty sum stays
// 0), computed by the device without waiting for it (where CountTargets
// waits to hand the count to the host). A target out of range that an
// earlier cross-entropy kernel met is then raised at the next
// synchronization.
func MeanDivisor(targets *Tensor, ignore int32, dt DType) *Tensor {
	op := "MeanDivisor"
	targets.live(op)
	indices(op, "targets", targets)
	if dt != Float32 && dt != Float64 {
		fail(op, ErrDType, "a %v scale: want float32 or float64", dt)
	}
	c, release := contigAll(targets)
	defer release()
	out := mustNew(op, ctxOf(op, targets), targets.dev, dt, nil)
	targets.dev.backend().meanDivisor(out, c[0], targets.Numel(), ignore)
	return out
}

// Dropout zeroes each element with probability p and scales the rest by
// 1/(1-p): it multiplies by its mask as PyTorch does, so a dropped NaN or
// infinity gives NaN and a dropped negative -0. The mask is a pure
// function of (seed, offset, index), so the
// same call on the output gradient is the backward, and a recomputation
// (activation checkpointing) reproduces it exactly.
func Dropout(t *Tensor, p float64, seed, offset uint64) *Tensor {
	op := "Dropout"
	t.live(op)
	sameArith(op, t)
	if p < 0 || p >= 1 || math.IsNaN(p) {
		fail(op, ErrArgument, "probability %v not in [0, 1)", p)
	}
	src, done := contig(t)
	defer done()
	out := mustNew(op, ctxOf(op, t), t.dev, t.dtype, t.shape)
	t.dev.backend().dropout(out, src, p, seed, offset)
	return out
}

// AdamWStep updates p in place with PyTorch's AdamW rule (decoupled weight
// decay, bias correction with the 1-based step), given gradient g and the
// moment buffers m and v, all contiguous and of one shape and dtype, no
// two sharing an element (ErrArgument).
func AdamWStep(p, g, m, v *Tensor, lr, beta1, beta2, eps, weightDecay float64, step int) {
	op := "AdamW"
	sameDevice(op, p, g, m, v)
	sameArith(op, p, g, m, v)
	for _, t := range []*Tensor{p, g, m, v} {
		if !shapeEq(t.shape, p.shape) || !t.IsContiguous() {
			fail(op, ErrShape, "parameter %v with buffer %v (contiguous %v)", p.shape, t.shape, t.IsContiguous())
		}
	}
	if step < 1 {
		fail(op, ErrArgument, "step %d: steps count from 1", step)
	}
	disjoint(op, "p, m, v", []*Tensor{p, m, v}, []*Tensor{g})
	modified(p, m, v)
	p.dev.backend().adamw(p, g, m, v, lr, beta1, beta2, eps, weightDecay, step)
}

// AdamWSteps is AdamWStep over many parameters at once, ps[i] with
// gradient gs[i], moments ms[i] and vs[i] and weight decay wd[i]: the same
// results, in one launch per device and dtype on a GPU (a model's
// hundreds of parameters took as many launches). A float32 parameter's
// gradient may be bf16 or fp16 (autograd's SetGradDType), with the
// update's results for their values: a GPU's kernel reads them as they
// are, the CPU widens them to float32 64 MiB at a time
// (ops_half_widen.go). Every argument is checked before any parameter
// changes; no parameter or moment may share an element with another
// tensor of the call (ErrArgument), gradients only with each other.
func AdamWSteps(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int) {
	adamwSteps(ps, gs, ms, vs, wd, lr, beta1, beta2, eps, step, 0)
}

// AdamWStepsOverlapped is AdamWSteps queued to run beside the ops that
// follow it: on a GPU, the update goes to the device's side stream in
// groups of about groupBytes of parameters, in the order of ps (give them
// in the order the next forward pass reads them), and an op that uses a
// parameter or moment waits only for its group, so the next forward pass
// starts while later groups are still being updated (cuda_side.go). The
// gradients may be released at once. The results are AdamWSteps' bit for
// bit. On the CPU it is AdamWSteps.
func AdamWStepsOverlapped(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int, groupBytes int64) {
	if groupBytes <= 0 {
		fail("AdamW", ErrArgument, "group size %d bytes: must be positive", groupBytes)
	}
	adamwSteps(ps, gs, ms, vs, wd, lr, beta1, beta2, eps, step, groupBytes)
}

// adamwSteps is AdamWSteps, overlapped on a GPU when groupBytes > 0.
func adamwSteps(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int, groupBytes int64) {
	op := "AdamW"
	adamwCheckLens(op, ps, gs, ms, vs, wd, step)
	type group struct {
		dev Device
		dt  DType
		idx []int
	}
	var groups []*group
	for i, p := range ps {
		adamwCheckParam(op, i, p, gs[i], ms[i], vs[i], true)
	}
	adamwCheckDisjoint(op, ps, gs, ms, vs)
	modified(ps...)
	modified(ms...)
	modified(vs...)
	for i, p := range ps {
		var g *group
		for _, h := range groups {
			if h.dev == p.dev && h.dt == p.dtype {
				g = h
			}
		}
		if g == nil {
			g = &group{dev: p.dev, dt: p.dtype}
			groups = append(groups, g)
		}
		g.idx = append(g.idx, i)
	}
	for _, g := range groups {
		pick := func(ts []*Tensor) []*Tensor {
			out := make([]*Tensor, len(g.idx))
			for j, i := range g.idx {
				out[j] = ts[i]
			}
			return out
		}
		w := make([]float64, len(g.idx))
		for j, i := range g.idx {
			w[j] = wd[i]
		}
		if cb, ok := g.dev.backend().(cudaBackend); ok && groupBytes > 0 {
			cb.adamwOverlapped(pick(ps), pick(gs), pick(ms), pick(vs), w, lr, beta1, beta2, eps, step, groupBytes)
			continue
		}
		g.dev.backend().adamwMulti(pick(ps), pick(gs), pick(ms), pick(vs), w, lr, beta1, beta2, eps, step)
	}
}

// adamwCheckLens fails unless gs, ms, vs and wd have an entry for each
// parameter of ps and step counts from 1 (adamwSteps and
// AdamWStepsPipelined).
func adamwCheckLens(op string, ps, gs, ms, vs []*Tensor, wd []float64, step int) {
	if len(gs) != len(ps) || len(ms) != len(ps) || len(vs) != len(ps) || len(wd) != len(ps) {
		fail(op, ErrArgument, "%d parameters with %d gradients, %d and %d moments and %d weight decays", len(ps), len(gs), len(ms), len(vs), len(wd))
	}
	if step < 1 {
		fail(op, ErrArgument, "step %d: steps count from 1", step)
	}
}

// adamwCheckParam fails unless parameter i, p, and its gradient g and
// moments m and v share a device and arithmetic, and the buffers have p's
// shape and are contiguous (adamwSteps, AdamWStepsPipelined and
// AdamWStepsGuarded). halfGrad allows a half gradient of a float32
// parameter; the guarded update reads gradients in their parameters'
// dtype and names the mismatch.
func adamwCheckParam(op string, i int, p, g, m, v *Tensor, halfGrad bool) {
	sameDevice(op, p, g, m, v)
	sameArith(op, p, m, v)
	if g.dtype != p.dtype && g.dtype.IsHalf() && p.dtype == Float32 {
		if !halfGrad {
			fail(op, ErrDType, "parameter %d has a %v gradient: the guarded update (CUDA graphs) reads gradients in their parameter's dtype; AdamWSteps and the overlapped and pipelined updates take half gradients of float32 parameters", i, g.dtype)
		}
	} else {
		sameArith(op, p, g)
	}
	for _, t := range []*Tensor{p, g, m, v} {
		if !shapeEq(t.shape, p.shape) || !t.IsContiguous() {
			fail(op, ErrShape, "parameter %d %v with buffer %v (contiguous %v)", i, p.shape, t.shape, t.IsContiguous())
		}
	}
}

// adamwCheckDisjoint fails unless the parameters and moments (checked by
// adamwCheckParam) share no element with each other or with a gradient:
// the update writes them all at once.
func adamwCheckDisjoint(op string, ps, gs, ms, vs []*Tensor) {
	writes := append(append(append([]*Tensor(nil), ps...), ms...), vs...)
	disjoint(op, "the parameters, then the first moments, then the second", writes, gs)
}

// SGDStep updates p in place with PyTorch's SGD rule; buf is the momentum
// buffer (nil when momentum is 0). p, g and buf are contiguous and of one
// shape and dtype, no two sharing an element (ErrArgument).
func SGDStep(p, g, buf *Tensor, lr, momentum, weightDecay float64, nesterov bool) {
	op := "SGD"
	ts := []*Tensor{p, g}
	if buf != nil {
		ts = append(ts, buf)
	}
	sameDevice(op, ts...)
	sameArith(op, ts...)
	for _, t := range ts {
		if !shapeEq(t.shape, p.shape) || !t.IsContiguous() {
			fail(op, ErrShape, "parameter %v with buffer %v (contiguous %v)", p.shape, t.shape, t.IsContiguous())
		}
	}
	if momentum != 0 && buf == nil {
		fail(op, ErrArgument, "momentum %v needs a buffer", momentum)
	}
	if nesterov && momentum == 0 {
		fail(op, ErrArgument, "nesterov momentum requires a momentum")
	}
	disjoint(op, "p, buf", []*Tensor{p, buf}, []*Tensor{g})
	modified(p, buf)
	p.dev.backend().sgd(p, g, buf, lr, momentum, weightDecay, nesterov)
}

// CausalMaskInPlace sets the future positions of contiguous t (..., T1,
// T2) to fill, in place (see CausalMask).
func (t *Tensor) CausalMaskInPlace(fill float64) {
	op := "CausalMaskInPlace"
	t.live(op)
	sameArith(op, t)
	if t.Rank() < 2 || !t.IsContiguous() {
		fail(op, ErrShape, "want a contiguous tensor of at least 2-D, got %v (contiguous %v)", t.shape, t.IsContiguous())
	}
	r, c := t.shape[t.Rank()-2], t.shape[t.Rank()-1]
	modified(t)
	if r*c > 0 {
		t.dev.backend().causalMask(t, t, t.Numel()/(r*c), r, c, fill)
	}
}
