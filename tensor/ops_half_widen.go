package tensor

// Half-precision gradients (autograd's Var.SetGradDType: bf16 gradients of
// float32 weights, as llm.c keeps them) reach the reductions and scalings
// of gradient clipping, which compute in float32: SumSquaresAll and
// ScaleAll widen them here, a bounded group at a time, so that a model's
// half gradients never all exist in float32 at once (that would give back
// the memory they save at the step's peak).

// halfWidenGroup is the most float32 bytes widened at once (a variable
// for the tests).
var halfWidenGroup = 64 << 20

// sumSquaresHalf is the sum of the squared elements of the half tensors
// ts (live, one device), widened to float32 in groups of at most
// halfWidenGroup bytes: one wait for the device a group.
func sumSquaresHalf(ts []*Tensor) float64 {
	var total float64
	for lo := 0; lo < len(ts); {
		hi, bytes := lo, 0
		for hi < len(ts) && (hi == lo || bytes+ts[hi].Numel()*4 <= halfWidenGroup) {
			bytes += ts[hi].Numel() * 4
			hi++
		}
		wide := make([]*Tensor, 0, hi-lo)
		func() {
			defer func() {
				for _, w := range wide {
					w.Release()
				}
			}()
			for _, t := range ts[lo:hi] {
				wide = append(wide, t.To(Float32))
			}
			total += ts[lo].dev.backend().sumSquares(wide)
		}()
		lo = hi
	}
	return total
}

// scaleHalf multiplies the contiguous half tensor t by alpha in place
// through float32: the product of its exact float32 value and alpha,
// rounded once to t's dtype (ScaleInPlace's rounding, in t's dtype).
func scaleHalf(t *Tensor, alpha float64) {
	w := t.To(Float32)
	defer w.Release()
	t.dev.backend().affine(w, w, alpha, 0)
	t.dev.backend().cast(t, w)
}
