package autograd

import (
	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// FusedCausalAttentionQKV is FusedCausalAttention over the heads of one
// (B, T, 3C) product qkv, as tensor.FusedCausalAttentionQKV lays them
// out (q, k and v side by side, each C wide, head h at columns
// [h·hd, (h+1)·hd) of each): y is (B, T, C) with the heads side by side,
// and the gradient of qkv is one (B, T, 3C) tensor. Against splitting the
// heads and calling FusedCausalAttention, there are no head split and
// merge copies in forward or backward (on CUDA the kernels read and write
// the token-major layouts in place), and the product is cast to the
// autocast dtype once, not per head group and again in backward.
//
// It keeps qkv as the kernels take it (under autocast the half-precision
// copy, which it owns, so the float32 product may be dropped by the
// caller; otherwise its own reference to qkv), y and the log-sum-exp. Its
// selective-checkpointing name is "FusedCausalAttention". Where the
// precision lets float32 products use TF32 (amp.State.TF32), float32 qkv
// runs the TF32 tensor-core kernels (tensor.AttentionMode), forward and
// backward alike.
func FusedCausalAttentionQKV(qkv *Var, heads int, p float64, seed, offset uint64) *Var {
	args("FusedCausalAttentionQKV", "qkv", qkv)
	const op = "FusedCausalAttention"
	pr := precisionOf(qkv.Value)
	mode := tensor.AttentionMode{TF32: pr.st.TF32}
	x := qkv.Value
	if dt := pr.operandDType(x); dt != x.DType() {
		x = amp.Cast(pr.c, x, dt) // the half copy under autocast
	} else {
		x = x.Alias() // the caller may Drop qkv; backward reads it
	}
	y, lse := hooked2(op, pr.c, func() (*tensor.Tensor, *tensor.Tensor) {
		return tensor.FusedCausalAttentionQKVMode(x, heads, p, seed, offset, mode)
	})
	out := y.Alias() // model code may Drop the output; backward reads it
	r := Record(op, y, []*Var{qkv}, func(g *tensor.Tensor) []*tensor.Tensor {
		gc, done := inDType(g, tensor.AccumDType(x.DType()))
		defer done()
		// d is in x's dtype: under autocast the half type, handed over as
		// it is when qkv's op takes it (a Linear, takesHalfGrad), else
		// widened by the engine.
		return []*tensor.Tensor{tensor.FusedCausalAttentionQKVBackwardMode(x, out, lse, gc, heads, p, seed, offset, mode)}
	}, x, out, lse).reads(0, false)
	if r.node == nil { // nothing to differentiate: keep nothing
		release(x, out, lse)
	}
	return r
}
