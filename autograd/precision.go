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
}

// precisionOf captures the precision of an op over ts.
func precisionOf(ts ...*tensor.Tensor) precision {
	c := tensor.CtxOf(ts...)
	return precision{c: c, st: amp.Current(c)}
}

// mm returns alpha * op(a) @ op(b), where ta and tb say whether to use
// the operand transposed (a view; the half copy is transposed, not the
// float32 original, so the GEMM reads it in place). Under autocast both
// operands are cast to the region's dtype (weights once per region, see
// amp.Operand) and the product accumulates and is returned in float32;
// otherwise it is the plain product (TF32 when the state allows).
func (p precision) mm(a, b *tensor.Tensor, ta, tb bool, alpha float64) *tensor.Tensor {
	mode := tensor.MatMulMode{TF32: p.st.TF32}
	var ops [2]*tensor.Tensor
	for i, x := range [2]*tensor.Tensor{a, b} {
		if p.st.Enabled && x.DType() == tensor.Float32 {
			x = amp.Cast(p.c, x, p.st.DType)
			mode.Float32Out = true
		} else {
			x = x.Alias()
		}
		if (i == 0 && ta) || (i == 1 && tb) {
			xt := x.T()
			x.Release()
			x = xt
		}
		ops[i] = x
	}
	out := tensor.MatMulWith(ops[0], ops[1], alpha, mode)
	ops[0].Release()
	ops[1].Release()
	return out
}
