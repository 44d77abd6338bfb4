package autograd

import (
	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// precision is how an op's matrix products run: the autocast state of
// the context at the op's forward, captured so that its backward products
// run the same way outside the region (PyTorch's autocast rule: backward
// ops run in the dtype their forward ran in).
type precision struct {
	c  *tensor.Ctx
	st amp.State
	// halfOut: under autocast the products return the region's dtype
	// instead of float32 (LinearHalf's forward).
	halfOut bool
}

// precisionOf captures the precision of an op over ts. An op over kept
// tensors alone (no operand of a context) runs in Background's state only
// for the goroutine working in Background (tensor.InBackgroundScope),
// where its result goes: another goroutine, working in a context of its
// own, must not pick up (nor cast into the cache of) an autocast region
// the Background goroutine entered; its op runs in float32.
func precisionOf(ts ...*tensor.Tensor) precision {
	c := tensor.CtxOf(ts...)
	st := amp.Current(c)
	if st != (amp.State{}) && c == tensor.Background() && keptOnly(ts) && !tensor.InBackgroundScope() {
		st = amp.State{}
	}
	return precision{c: c, st: st}
}

// keptOnly reports whether no tensor of ts belongs to a context (kept
// tensors and orphans; nil entries aside).
func keptOnly(ts []*tensor.Tensor) bool {
	for _, t := range ts {
		if t != nil && t.Ctx() != nil {
			return false
		}
	}
	return true
}

// mm returns alpha * op(a) @ op(b); see products.mm.
func (p precision) mm(a, b *tensor.Tensor, ta, tb bool, alpha float64) *tensor.Tensor {
	ps := p.products()
	defer ps.release()
	return ps.mm(a, b, ta, tb, alpha)
}

// products runs several products of one op in precision p, casting each
// operand once: a backward that multiplies the output gradient by two
// different matrices casts it to the half type once, not twice.
func (p precision) products() *products { return &products{p: p} }

type products struct {
	p        precision
	src, low []*tensor.Tensor // operands cast so far and their copies
}

// operand returns x as the products multiply it: under autocast a float32
// x cast to the region's dtype (weights once per region, see amp.Cast),
// memoized; otherwise x itself. The result belongs to ps.
func (ps *products) operand(x *tensor.Tensor) *tensor.Tensor {
	if !ps.p.st.Enabled || x.DType() != tensor.Float32 {
		return x
	}
	for i, s := range ps.src {
		if s == x {
			return ps.low[i]
		}
	}
	l := amp.Cast(ps.p.c, x, ps.p.st.DType)
	ps.src, ps.low = append(ps.src, x), append(ps.low, l)
	return l
}

// mm returns alpha * op(a) @ op(b), where ta and tb say whether to use
// the operand transposed (a view; the half copy is transposed, not the
// float32 original, so the GEMM reads it in place). Under autocast both
// operands are cast to the region's dtype and the product accumulates and
// is returned in float32; otherwise it is the plain product (TF32 when
// the state allows).
func (ps *products) mm(a, b *tensor.Tensor, ta, tb bool, alpha float64) *tensor.Tensor {
	x, y, release := ps.operands(a, b, ta, tb)
	defer release()
	return tensor.MatMulWith(x, y, alpha, ps.mode())
}

// weightCopy returns, under autocast, the region's copy of the kept
// float32 weight w in the products' dtype (amp.Cast: the one the
// forward's product reads), for the op to save for its backward, whose
// product with the output gradient then reads it instead of casting w
// again outside the region (PyTorch's autocast saves the cast weight for
// backward the same way). nil otherwise: the weight is taken as it is.
// The caller owns it (Record's saved tensors).
func (pr precision) weightCopy(w *tensor.Tensor) *tensor.Tensor {
	if !pr.st.Enabled || w.DType() != tensor.Float32 || w.Ctx() != nil {
		return nil
	}
	return amp.Cast(pr.c, w, pr.st.DType)
}

// with makes low (x in the products' dtype, owned by the caller) the
// operand the products take for x: backward's products reuse the copy
// their forward saved (weightCopy). A nil low changes nothing.
func (ps *products) with(x, low *tensor.Tensor) {
	if low != nil && ps.p.st.Enabled {
		ps.src, ps.low = append(ps.src, x), append(ps.low, low.Alias())
	}
}

// mmInto writes op(a) @ op(b) + beta·c into c, the product's dtype (see
// mm), by the GEMM's own accumulation (tensor.MatMulInto).
func (ps *products) mmInto(c, a, b *tensor.Tensor, ta, tb bool, beta float64) {
	x, y, release := ps.operands(a, b, ta, tb)
	defer release()
	tensor.MatMulInto(c, x, y, beta, ps.mode())
}

// mmHalfOut is mm (alpha 1) with the product returned in the operands'
// dtype (the region's under autocast) instead of float32.
func (ps *products) mmHalfOut(a, b *tensor.Tensor, ta, tb bool) *tensor.Tensor {
	x, y, release := ps.operands(a, b, ta, tb)
	defer release()
	mode := ps.mode()
	mode.Float32Out = false
	return tensor.MatMulWith(x, y, 1, mode)
}

// mmBias is mm (alpha 1) with bias (n) added to every row of the
// product: tensor.MatMulBias, in the GEMM's epilogue on a GPU.
func (ps *products) mmBias(a, b, bias *tensor.Tensor, ta, tb bool) *tensor.Tensor {
	x, y, release := ps.operands(a, b, ta, tb)
	defer release()
	return tensor.MatMulBias(x, y, bias, ps.mode())
}

// mmRowSums is mm (alpha 1) and the row sums of op(a) as the product
// takes it (a's cast under autocast): tensor.MatMulRowSums, a linear
// layer's weight and bias gradients in one GEMM on a GPU.
func (ps *products) mmRowSums(a, b *tensor.Tensor, ta, tb bool) (c, sums *tensor.Tensor) {
	x, y, release := ps.operands(a, b, ta, tb)
	defer release()
	return tensor.MatMulRowSums(x, y, ps.mode())
}

// operands returns op(a) and op(b) as the products take them (transposed
// views of the cast copies), and what releases the views.
func (ps *products) operands(a, b *tensor.Tensor, ta, tb bool) (x, y *tensor.Tensor, release func()) {
	x, y = ps.operand(a), ps.operand(b)
	var views []*tensor.Tensor
	if ta {
		x = x.T()
		views = append(views, x)
	}
	if tb {
		y = y.T()
		views = append(views, y)
	}
	return x, y, func() {
		for _, v := range views {
			v.Release()
		}
	}
}

// mode is the products' tensor.MatMulMode.
func (ps *products) mode() tensor.MatMulMode {
	return tensor.MatMulMode{TF32: ps.p.st.TF32, Float32Out: ps.p.st.Enabled && !ps.p.halfOut}
}

// drop frees x's low-precision copy now (a large operand no later
// product of the op reads).
func (ps *products) drop(x *tensor.Tensor) {
	for i, s := range ps.src {
		if s == x {
			ps.low[i].Release()
			ps.src = append(ps.src[:i], ps.src[i+1:]...)
			ps.low = append(ps.low[:i], ps.low[i+1:]...)
			return
		}
	}
}

// dtype is the dtype in which the products take x: the region's under
// autocast for float32 x, else x's own.
func (ps *products) dtype(x *tensor.Tensor) tensor.DType { return ps.p.operandDType(x) }

// outDType is the dtype of the products' result with operand x (float32
// for a half operand under Float32Out, see mode).
func (ps *products) outDType(x *tensor.Tensor) tensor.DType {
	dt := ps.dtype(x)
	if dt.IsHalf() && ps.mode().Float32Out {
		return tensor.Float32
	}
	return dt
}

// operandDType is the dtype in which pr's products take x.
func (pr precision) operandDType(x *tensor.Tensor) tensor.DType {
	if pr.st.Enabled && x.DType() == tensor.Float32 {
		return pr.st.DType
	}
	return x.DType()
}

// retype returns t, a gradient the caller owns, in dtype dt (the dtype of
// the value it is the gradient of): t itself when it has it, else a copy,
// releasing t.
func retype(t *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	if t.DType() == dt {
		return t
	}
	c := t.To(dt)
	t.Release()
	return c
}

// inDType returns t in dtype dt for reading (t itself when it has it,
// else a copy) and what releases that copy; t stays the caller's.
func inDType(t *tensor.Tensor, dt tensor.DType) (*tensor.Tensor, func()) {
	if t.DType() == dt {
		return t, func() {}
	}
	c := t.To(dt)
	return c, c.Release
}

// arithDType is the dtype in which arithmetic on values of dtype dt runs:
// float32 for a half dt (the tensor package's arithmetic runs in float32
// and float64), dt itself otherwise.
func arithDType(dt tensor.DType) tensor.DType {
	if dt.IsHalf() {
		return tensor.Float32
	}
	return dt
}

// release frees the low-precision copies.
func (ps *products) release() {
	for _, l := range ps.low {
		l.Release()
	}
	ps.src, ps.low = nil, nil
}
