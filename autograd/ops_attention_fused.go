package autograd

import (
	"github.com/strata-ml/strata/amp"
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
	const op = "FusedCausalAttention"
	pr := precisionOf(q.Value, k.Value, v.Value)
	var lse *tensor.Tensor
	y := hooked2(op, opCtx(q.Value, nil), &lse, func() (*tensor.Tensor, *tensor.Tensor) {
		qc, kc, vc := pr.attentionOperands(q.Value, k.Value, v.Value)
		defer release(qc, kc, vc)
		return tensor.FusedCausalAttention(qc, kc, vc, p, seed, offset)
	})
	out := y.Alias() // model code may Drop the output; backward reads it
	r := Record(op, y, []*Var{q, k, v}, func(g *tensor.Tensor) []*tensor.Tensor {
		qc, kc, vc := pr.attentionOperands(q.Value, k.Value, v.Value)
		defer release(qc, kc, vc)
		gc := g
		if acc := tensor.AccumDType(qc.DType()); g.DType() != acc {
			gc = g.To(acc)
			defer gc.Release()
		}
		dq, dk, dv := tensor.FusedCausalAttentionBackward(qc, kc, vc, out, lse, gc, p, seed, offset)
		grads := []*tensor.Tensor{dq, dk, dv}
		for i, in := range []*Var{q, k, v} {
			switch {
			case !needs(in):
				grads[i].Release()
				grads[i] = nil
			case grads[i].DType() != in.Value.DType():
				c := grads[i].To(in.Value.DType())
				grads[i].Release()
				grads[i] = c
			}
		}
		return grads
	}, out, lse)
	if r.node == nil { // nothing to differentiate: keep nothing
		release(out, lse)
	}
	return r
}

// attentionOperands returns q, k, v as the fused attention should read
// them: cast to the autocast dtype when the precision is an enabled
// region and they are float32, else new views of them. The caller
// releases all three.
func (p precision) attentionOperands(q, k, v *tensor.Tensor) (qc, kc, vc *tensor.Tensor) {
	var ts [3]*tensor.Tensor
	for i, x := range [3]*tensor.Tensor{q, k, v} {
		if p.st.Enabled && x.DType() == tensor.Float32 {
			ts[i] = amp.Cast(p.c, x, p.st.DType)
		} else {
			ts[i] = x.Alias()
		}
	}
	return ts[0], ts[1], ts[2]
}

func release(ts ...*tensor.Tensor) {
	for _, t := range ts {
		t.Release()
	}
}

// hooked2 is hooked for an op with two outputs, the second returned
// through second.
func hooked2(op string, c *tensor.Ctx, second **tensor.Tensor, compute func() (a, b *tensor.Tensor)) *tensor.Tensor {
	h := OpHookIn(c)
	if h == nil {
		a, b := compute()
		*second = b
		return a
	}
	if outs := h.Enter(op); outs != nil {
		*second = outs[1]
		return outs[0]
	}
	a, b := compute()
	h.Leave(op, a, b)
	*second = b
	return a
}
