package autograd

import (
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
// backward instead of storing it.
func CausalAttention(q, k, v *Var, p float64, seed, offset uint64) *Var {
	hd := q.Value.Dim(-1)
	scale := 1 / math.Sqrt(float64(hd))
	probs := func() *tensor.Tensor {
		kt := k.Value.T()
		scores := tensor.MatMulScaled(q.Value, kt, scale)
		kt.Release()
		att := tensor.CausalSoftmax(scores)
		scores.Release()
		return att
	}
	y := hooked("CausalAttention", opCtx(q.Value, nil), func() *tensor.Tensor {
		att := probs()
		attD := att
		if p > 0 {
			attD = tensor.Dropout(att, p, seed, offset)
		}
		y := tensor.MatMul(attD, v.Value)
		if attD != att {
			attD.Release()
		}
		att.Release()
		return y
	})
	return Record("CausalAttention", y, []*Var{q, k, v}, func(g *tensor.Tensor) []*tensor.Tensor {
		att := probs()
		defer att.Release()
		var gq, gk, gv *tensor.Tensor
		if needs(v) { // dv = attDᵀ g
			a := att
			if p > 0 {
				a = tensor.Dropout(att, p, seed, offset)
			}
			at := a.T()
			gv = tensor.MatMul(at, g)
			at.Release()
			if a != att {
				a.Release()
			}
		}
		vt := v.Value.T()
		datt := tensor.MatMul(g, vt) // (B,H,T,T)
		vt.Release()
		if p > 0 {
			d := tensor.Dropout(datt, p, seed, offset)
			datt.Release()
			datt = d
		}
		ds := tensor.CausalSoftmaxBackward(att, datt) // zero at the masked entries
		datt.Release()
		if needs(q) {
			gq = tensor.MatMulScaled(ds, k.Value, scale)
		}
		if needs(k) {
			dst := ds.T()
			gk = tensor.MatMulScaled(dst, q.Value, scale)
			dst.Release()
		}
		ds.Release()
		return []*tensor.Tensor{gq, gk, gv}
	})
}
