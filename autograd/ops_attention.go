package autograd

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/tensor"
)

// CausalAttention is plain (materialised) causal self-attention over
// q, k, v of shape (B, H, T, hd):
//
//	att = softmax(mask(q kᵀ / √hd)),  y = dropout(att) v
//
// with the mask and the softmax fused (tensor.CausalSoftmax: the masked
// scores are never read or written), written as one op that keeps
// nothing but its inputs: the (B, H, T, T)
// probabilities are freed as soon as y is computed and recomputed from q
// and k in backward (one extra GEMM and softmax), the way fused attention
// kernels do. The unfused chain of ops would keep the raw scores, the
// masked scores and the probabilities until backward. Dropout on att
// (p > 0) draws its mask from (seed, offset) and regenerates it in
// backward instead of storing it. Under autocast (package amp) its four
// products run in the region's dtype with float32 results, while the
// softmax and its backward stay in float32, as PyTorch's autocast lists
// say. A p outside [0, 1) (NaN included) panics with an *tensor.OpError
// wrapping tensor.ErrArgument, as FusedCausalAttention does; a bf16 or
// fp16 q, k or v with one wrapping tensor.ErrDType (FusedCausalAttention
// takes them).
func CausalAttention(q, k, v *Var, p float64, seed, offset uint64) *Var {
	args("CausalAttention", "q k v", q, k, v)
	if !(p >= 0 && p < 1) { // as the fused kernels' check: a NaN or negative p is not "no dropout"
		panic(&tensor.OpError{Op: "autograd.CausalAttention", Msg: fmt.Sprintf("dropout probability %v not in [0, 1)", p), Err: tensor.ErrArgument})
	}
	for i, x := range []*Var{q, k, v} {
		if dt := x.Value.DType(); dt.IsHalf() { // refused by the softmax, an op the caller never called
			panic(&tensor.OpError{Op: "autograd.CausalAttention", Msg: fmt.Sprintf("%s is %v: its softmax runs in float32 and float64; "+
				"FusedCausalAttention takes half-precision inputs (or cast them to float32 first)", "qkv"[i:i+1], dt), Err: tensor.ErrDType})
		}
	}
	hd := q.Value.Dim(-1)
	scale := 1 / math.Sqrt(float64(hd))
	pr := precisionOf(q.Value, k.Value, v.Value)
	probs := func(ps *products) *tensor.Tensor {
		scores := ps.mm(q.Value, k.Value, false, true, scale)
		att := tensor.CausalSoftmax(scores)
		scores.Release()
		return att
	}
	y := hooked("CausalAttention", pr.c, func() *tensor.Tensor {
		ps := pr.products()
		defer ps.release()
		att := probs(ps)
		attD := att
		if p > 0 {
			attD = tensor.Dropout(att, p, seed, offset)
		}
		y := ps.mm(attD, v.Value, false, false, 1)
		ps.drop(attD) // the (B, H, T, T) copy
		if attD != att {
			attD.Release()
		}
		att.Release()
		return y
	})
	return Record("CausalAttention", y, []*Var{q, k, v}, func(g *tensor.Tensor) []*tensor.Tensor {
		ps := pr.products() // q, k, g and ds are cast once each
		defer ps.release()
		att := probs(ps)
		defer att.Release()
		var gq, gk, gv *tensor.Tensor
		if needs(v) { // dv = attDᵀ g
			a := att
			if p > 0 {
				a = tensor.Dropout(att, p, seed, offset)
			}
			gv = ps.mm(a, g, true, false, 1)
			ps.drop(a)
			if a != att {
				a.Release()
			}
		}
		if !needs(q) && !needs(k) {
			return []*tensor.Tensor{gq, gk, gv}
		}
		datt := ps.mm(g, v.Value, false, true, 1) // (B,H,T,T)
		if p > 0 {
			d := tensor.Dropout(datt, p, seed, offset)
			datt.Release()
			datt = d
		}
		ds := tensor.CausalSoftmaxBackward(att, datt) // zero at the masked entries
		datt.Release()
		if needs(q) {
			gq = ps.mm(ds, k.Value, false, false, scale)
		}
		if needs(k) {
			gk = ps.mm(ds, q.Value, true, false, scale)
		}
		ds.Release()
		return []*tensor.Tensor{gq, gk, gv}
	}).reads(bit(0, true)|bit(1, true)|bit(2, needs(q) || needs(k)), false) // the probabilities are recomputed from q and k
}
