package tensor

// Half-precision gradients (autograd's Var.SetGradDType: bf16 gradients of
// float32 weights, as llm.c keeps them) reach the reductions and scalings
// of gradient clipping and AdamW's update, which compute in float32. A
// GPU's kernels read them as they are (the sum of squares and AdamW
// widen each element in registers); the CPU backend's sumSquares and
// adamwMulti widen them with the helpers here, a bounded group at a time,
// so that a model's half gradients never all exist in float32 at once
// (that would give back the memory they save at the step's peak), and
// ScaleAll scales each through float32 (scaleHalf). The widening is
// exact, so each gets the float32 op's result for the half values.

// halfWidenGroup is the most float32 bytes widened at once (a variable
// for the tests).
var halfWidenGroup = 64 << 20

// widenGroups calls fn(lo, hi) for consecutive groups of ts whose float32
// bytes come to at most halfWidenGroup (a larger tensor is a group alone).
func widenGroups(ts []*Tensor, fn func(lo, hi int)) {
	for lo := 0; lo < len(ts); {
		hi, bytes := lo, 0
		for hi < len(ts) && (hi == lo || bytes+ts[hi].Numel()*4 <= halfWidenGroup) {
			bytes += ts[hi].Numel() * 4
			hi++
		}
		fn(lo, hi)
		lo = hi
	}
}

// widened returns ts with every half tensor replaced by a float32 copy,
// and the func that releases the copies (released at once when a copy
// fails).
func widened(ts []*Tensor) (out []*Tensor, release func()) {
	var copies []*Tensor
	release = func() {
		for _, c := range copies {
			c.Release()
		}
	}
	done := false
	defer func() {
		if !done {
			release()
		}
	}()
	out = make([]*Tensor, len(ts))
	for i, t := range ts {
		out[i] = t
		if t.dtype.IsHalf() {
			out[i] = t.To(Float32)
			copies = append(copies, out[i])
		}
	}
	done = true
	return out, release
}

// scaleHalf multiplies the contiguous half tensor t by alpha in place
// through float32: its exact float32 value times float32(alpha), rounded
// to float32 and then to t's dtype. For a power of two (a loss scale or
// its inverse) that is exact up to the final rounding; otherwise the two
// roundings may differ from one by an ulp of t's dtype, rarely (a float64
// temporary would round once at twice the float32 one's bytes).
func scaleHalf(t *Tensor, alpha float64) {
	w := t.To(Float32)
	defer w.Release()
	t.dev.backend().affine(w, w, alpha, 0)
	t.dev.backend().cast(t, w)
}
