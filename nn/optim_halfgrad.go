package nn

import "github.com/strata-ml/strata/tensor"

// Gradients kept in a half dtype (autograd's SetGradDType; train-gpt
// -grad-dtype bf16 for the blocks' weights, as llm.c keeps them) take half
// the memory at the step's peak, the end of the backward pass. AdamW
// updates in its parameters' dtype, so it widens them here, a group of at
// most widenGroup float32 bytes at a time (one launch a group on a GPU),
// and frees each group's widened copies as soon as its update is queued:
// the update never holds the float32 gradients of the whole model again.
// The widening is exact, so the update is AdamWSteps' with the half
// gradients' values, bit for bit.

// widenGroup is the most float32 gradient bytes widened at once.
var widenGroup int64 = 64 << 20 // a variable for the tests

// halfGrads reports whether any gradient's dtype differs from its
// parameter's.
func halfGrads(ps, gs []*tensor.Tensor) bool {
	for i, g := range gs {
		if g.DType() != ps[i].DType() {
			return true
		}
	}
	return false
}

// adamwWidened is tensor.AdamWSteps with the gradients that are not in
// their parameter's dtype widened to it, in groups.
func adamwWidened(ps, gs, ms, vs []*tensor.Tensor, wd []float64, lr, beta1, beta2, eps float64, step int) {
	for lo := 0; lo < len(ps); {
		hi, bytes := lo, int64(0)
		for hi < len(ps) && (hi == lo || bytes+ps[hi].Bytes() <= widenGroup) {
			bytes += ps[hi].Bytes()
			hi++
		}
		func() {
			g := make([]*tensor.Tensor, hi-lo)
			var wide []*tensor.Tensor
			defer func() {
				for _, w := range wide {
					w.Release()
				}
			}()
			for i := lo; i < hi; i++ {
				g[i-lo] = gs[i]
				if gs[i].DType() != ps[i].DType() {
					w := gs[i].To(ps[i].DType())
					wide = append(wide, w)
					g[i-lo] = w
				}
			}
			tensor.AdamWSteps(ps[lo:hi], g, ms[lo:hi], vs[lo:hi], wd[lo:hi], lr, beta1, beta2, eps, step)
		}()
		lo = hi
	}
}
