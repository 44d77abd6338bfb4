package autograd

import (
	"github.com/strata-ml/strata/tensor"
)

// Softmax over the last axis.
func Softmax(x *Var) *Var {
	args("Softmax", "x", x)
	out := hooked("Softmax", tensor.CtxOf(x.Value), func() *tensor.Tensor { return tensor.Softmax(x.Value) })
	return Record("Softmax", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.SoftmaxBackward(out, g, false)}
	}).reads(0, true)
}

// LogSoftmax over the last axis.
func LogSoftmax(x *Var) *Var {
	args("LogSoftmax", "x", x)
	out := tensor.LogSoftmax(x.Value)
	return Record("LogSoftmax", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.SoftmaxBackward(out, g, true)}
	}).reads(0, true)
}

// CausalSoftmax is Softmax(CausalMask(x, -Inf)) as one op: the softmax
// over the last axis of x (..., T1, T2) of the positions j <= i + T2 - T1,
// zero at the others, also in a row that comes out NaN at its kept
// positions (+Inf, NaN or only -Inf there), which the chain makes NaN
// throughout (tensor.CausalSoftmax).
func CausalSoftmax(x *Var) *Var {
	args("CausalSoftmax", "x", x)
	out := hooked("CausalSoftmax", tensor.CtxOf(x.Value), func() *tensor.Tensor { return tensor.CausalSoftmax(x.Value) })
	return Record("CausalSoftmax", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.CausalSoftmaxBackward(out, g)}
	}).reads(0, true)
}

// CausalMask sets future positions of the last two axes (T1, T2) to fill:
// element (i, j) where j > i + T2 - T1, j > i when T1 == T2 (use
// tensor.NegInf before a softmax; tensor.CausalMask).
func CausalMask(x *Var, fill float64) *Var {
	args("CausalMask", "x", x)
	out := tensor.CausalMask(x.Value, fill)
	return Record("CausalMask", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.CausalMask(g, 0)}
	}).reads(0, false)
}

// LayerNorm normalises over the last axis with optional weight and bias
// (each of shape [C]); like PyTorch's F.layer_norm.
func LayerNorm(x, w, b *Var, eps float64) *Var {
	args("LayerNorm", "x w? b?", x, w, b)
	return layerNorm(x, w, b, eps, x.Value.DType())
}

// LayerNormHalf is LayerNorm for an output that feeds only matrix
// products (a transformer block's q/k/v and MLP projections): under
// autocast, for float32 x, the output is written in the region's dtype,
// rounded once as the products' cast would round it (tensor.LayerNormTo),
// so the products take it as it is, cast nothing in forward or again in
// backward, and keep the half copy for their backward (half the bytes).
// Its backward works in float32 and takes the products' float32 gradient
// as it comes. The same bits as LayerNorm followed by the products;
// outside autocast it is LayerNorm.
func LayerNormHalf(x, w, b *Var, eps float64) *Var {
	args("LayerNormHalf", "x w? b?", x, w, b)
	pr := precisionOf(x.Value)
	v := layerNorm(x, w, b, eps, pr.operandDType(x.Value))
	if v.node != nil && v.Value.DType() != x.Value.DType() {
		v.node.alsoTakes |= 1 << x.Value.DType()
	}
	return v
}

// layerNorm is LayerNorm with its output in dtype dt.
func layerNorm(x, w, b *Var, eps float64, dt tensor.DType) *Var {
	var wv, bv *tensor.Tensor
	var bdt tensor.DType // b's dtype, for its gradient when there is no w
	if w != nil {
		wv = w.Value
	}
	if b != nil {
		bv, bdt = b.Value, b.Value.DType()
	}
	y, mean, rstd := hooked3("LayerNorm", tensor.CtxOf(x.Value), func() (y, mean, rstd *tensor.Tensor) {
		return tensor.LayerNormTo(x.Value, wv, bv, eps, dt)
	})
	return Record("LayerNorm", y, []*Var{x, w, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		g, done := inDType(g, x.Value.DType()) // a half gradient of a half output, widened
		defer done()
		dx, dw, db := tensor.LayerNormBackward(g, x.Value, mean, rstd, wv, bv != nil)
		if !needs(x) {
			dx.Release()
			dx = nil
		}
		if !needs(w) {
			dw.Release()
			dw = nil
		}
		if !needs(b) {
			db.Release()
			db = nil
		} else if db == nil { // no weight: the kernels make no db; it is Σ rows of g
			g2 := flat2D(g)
			db = retype(tensor.Sum(g2, false, 0), bdt)
			g2.Release()
		}
		return []*tensor.Tensor{dx, dw, db}
	}, mean, rstd).reads(bit(0, true)|bit(1, true), false)
}

// Embedding gathers rows of table (V, D) at int32 ids. The gradient of a
// bfloat16 or float16 table is scattered in float32 and returned in the
// table's dtype.
func Embedding(table *Var, ids *tensor.Tensor) *Var {
	args("Embedding", "table", table)
	out := tensor.Embedding(table.Value, ids)
	rows := table.Value.Dim(0)
	inputs := []*Var{table}
	ids = aliasFor(ids, out, inputs) // backward's own reference: the caller may release ids
	dt := table.Value.DType()
	v := Record("Embedding", out, inputs, func(g *tensor.Tensor) []*tensor.Tensor {
		if dst := gradInPlace(table, g); dst != nil {
			tensor.EmbeddingBackwardInto(dst, ids, g)
			return []*tensor.Tensor{nil}
		}
		// A half table's gradient (outside autocast) is scattered in
		// float32, as arithmetic runs there, and returned in its dtype.
		g, done := inDType(g, arithDType(g.DType()))
		defer done()
		return []*tensor.Tensor{retype(tensor.EmbeddingBackward(ids, g, rows), dt)}
	}, ids).reads(0, false)
	releaseUnrecorded(v, ids)
	return v
}

// gradInPlace is the gradient of table that an embedding's backward may
// add its rows into directly: a leaf's Grad that holds other
// contributions already (a tied embedding's, which the output head gave
// first), of g's dtype, not a half one (arithmetic runs in float32: the
// engine adds the rows to it through float32, rounded once), contiguous;
// nil otherwise. Adding into it saves the (rows, D) gradient the engine
// would add and free: gpt2-medium's vocabulary table, 196 MiB in float32,
// at the end of backward, where the step's gradients are all held. A
// region's input (Var.regionIn) may hold as its Grad a view that shares
// its storage with a gradient still pending elsewhere (Add hands both its
// inputs views of one tensor); such a Grad is not written in place, as
// keepGrad does not write it.
func gradInPlace(table *Var, g *tensor.Tensor) *tensor.Tensor {
	if table.node != nil || !table.requiresGrad || table.Grad == nil || table.Grad.DType() != g.DType() || g.DType().IsHalf() || !table.Grad.IsContiguous() ||
		table.regionIn && !table.Grad.Sole() ||
		stateOf(tensor.CtxOf(g)).capturing.Load() > 0 { // Grad: no leaf's Grad changes
		return nil
	}
	return table.Grad
}

// IgnoreIndex is the target value CrossEntropy skips (PyTorch's default).
const IgnoreIndex = -100

// meanDivisor is a scalar of t's dtype, device and context (a sum, or the
// incoming gradient backward divides) holding the divisor that turns a
// sum over n counted rows into their mean, as PyTorch divides (a product
// with a rounded 1/n is an ulp off), or 1 when no row counts (every
// target ignored): the sum is then 0 and so is the loss, where PyTorch's
// mean would be NaN.
func meanDivisor(t *tensor.Tensor, n int) *tensor.Tensor {
	return tensor.CtxOf(t).Full(t.Device(), t.DType(), float64(max(n, 1)))
}

// CrossEntropy returns the mean cross-entropy of logits (N, C) against
// int32 targets (N), skipping targets equal to IgnoreIndex, like
// PyTorch's F.cross_entropy, except when no target counts (every one
// ignored, or N = 0): the loss is then 0, where PyTorch's mean is 0/0,
// NaN (the gradient is 0 in both). The softmax is recomputed in backward rather
// than stored, which saves an (N, C) activation.
func CrossEntropy(logits *Var, targets *tensor.Tensor) *Var {
	args("CrossEntropy", "logits", logits)
	losses, n := tensor.CrossEntropy(logits.Value, targets, IgnoreIndex)
	sum := tensor.Sum(losses, false)
	losses.Release()
	div := meanDivisor(sum, n)
	out := tensor.Div(sum, div)
	sum.Release()
	div.Release()
	rows := logits.Value.Dim(0)
	inputs := []*Var{logits}
	targets = aliasFor(targets, out, inputs) // backward's own reference: the caller may release targets
	v := Record("CrossEntropy", out, inputs, func(g *tensor.Tensor) []*tensor.Tensor {
		d := meanDivisor(g, n)
		gs := tensor.Div(g, d) // each row's gradient, g/n as PyTorch's nll_loss backward
		d.Release()
		e := gs.Reshape(1).Expand(rows)
		dl := tensor.CrossEntropyBackward(logits.Value, targets, e, IgnoreIndex)
		gs.Release()
		e.Release()
		return []*tensor.Tensor{dl}
	}, targets)
	releaseUnrecorded(v, targets)
	return v
}

// Dropout zeroes elements with probability p (scaling the rest by
// 1/(1-p)). The mask is a function of (seed, offset, index), so nothing is
// stored for backward. p == 0 returns x itself.
func Dropout(x *Var, p float64, seed, offset uint64) *Var {
	args("Dropout", "x", x)
	if p == 0 {
		return x
	}
	out := tensor.Dropout(x.Value, p, seed, offset)
	return Record("Dropout", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Dropout(g, p, seed, offset)}
	}).reads(0, false)
}

// Cast converts x to dtype dt; the gradient is cast back. A cast to an
// integer dtype is not differentiable: its result requires no gradient.
func Cast(x *Var, dt tensor.DType) *Var {
	args("Cast", "x", x)
	src := x.Value.DType()
	out := x.Value.To(dt)
	return Record("Cast", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.To(src)}
	}).reads(0, false)
}
