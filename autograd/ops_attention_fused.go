package autograd

import (
	"github.com/strata-ml/strata/tensor"
)

// FusedCausalAttention is CausalAttention computed by the fused kernels
// (tensor.FusedCausalAttention, FlashAttention-2): the same function of
// q, k, v (B, H, T, hd), the same dropout mask for the same (p, seed,
// offset), but the (B, H, T, T) probabilities never exist, not even for
// one op: the forward streams k and v through tiles with the online
// softmax, and backward recomputes the probabilities tile by tile from
// q, k and the per-row log-sum-exp. It keeps q, k, v (as CausalAttention
// does), its output and the (B, H, T) log-sum-exp.
//
// Under autocast (package amp) float32 q, k and v are cast to the
// region's dtype, multiplied with float32 accumulation, and the output
// and gradients are float32, as the products of the plain path are (the
// casts are made again in backward, outside the region). Gradients of
// half-precision inputs are returned in their dtype.
func FusedCausalAttention(q, k, v *Var, p float64, seed, offset uint64) *Var {
	args("FusedCausalAttention", "q k v", q, k, v)
	const op = "FusedCausalAttention"
	pr := precisionOf(q.Value, k.Value, v.Value)
	y, lse := hooked2(op, pr.c, func() (*tensor.Tensor, *tensor.Tensor) {
		ps := pr.products()
		defer ps.release()
		return tensor.FusedCausalAttention(ps.operand(q.Value), ps.operand(k.Value), ps.operand(v.Value), p, seed, offset)
	})
	out := y.Alias() // model code may Drop the output; backward reads it
	r := Record(op, y, []*Var{q, k, v}, func(g *tensor.Tensor) []*tensor.Tensor {
		ps := pr.products()
		defer ps.release()
		qc, kc, vc := ps.operand(q.Value), ps.operand(k.Value), ps.operand(v.Value)
		gc, done := inDType(g, tensor.AccumDType(qc.DType()))
		defer done()
		dq, dk, dv := tensor.FusedCausalAttentionBackward(qc, kc, vc, out, lse, gc, p, seed, offset)
		grads := []*tensor.Tensor{dq, dk, dv}
		for i, in := range []*Var{q, k, v} {
			if !needs(in) {
				grads[i].Release()
				grads[i] = nil
				continue
			}
			grads[i] = retype(grads[i], in.Value.DType())
		}
		return grads
	}, out, lse)
	if r.node == nil { // nothing to differentiate: keep nothing
		release(out, lse)
	}
	return r
}

func release(ts ...*tensor.Tensor) {
	for _, t := range ts {
		t.Release()
	}
}
