package tensor

import "github.com/strata-ml/strata/tensor/internal/cpukern"

// The CPU's fused attention runs cpukern's blockwise kernels in the
// accumulation dtype; float16 and bfloat16 inputs are widened to float32
// first (exactly), which is what the GPU's loads do, into a workspace
// from the device's memory manager (workspace32).

func (cpuBackend) attentionForward(out, lse, q, k, v *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	if q.dtype == Float64 {
		cpukern.AttentionForward(f64(out), f64(lse), f64(q), f64(k), f64(v), bh, t, hd, scale, p, seed, offset)
		return
	}
	w, free := widen32("FusedCausalAttention", q, k, v)
	defer free()
	qs, ks, vs := w[0], w[1], w[2]
	cpukern.AttentionForward(f32(out), f32(lse), qs, ks, vs, bh, t, hd, scale, p, seed, offset)
}

func (cpuBackend) attentionBackward(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	if q.dtype == Float64 {
		cpukern.AttentionBackward(f64(dq), f64(dk), f64(dv), f64(q), f64(k), f64(v), f64(out), f64(dout), f64(lse), bh, t, hd, scale, p, seed, offset)
		return
	}
	w, free := widen32("FusedCausalAttentionBackward", q, k, v)
	defer free()
	qs, ks, vs := w[0], w[1], w[2]
	cpukern.AttentionBackward(f32(dq), f32(dk), f32(dv), qs, ks, vs, f32(out), f32(dout), f32(lse), bh, t, hd, scale, p, seed, offset)
}

// widen32 returns contiguous ts' elements as float32: a float32 tensor's
// own data, a widened copy of a float16 or bfloat16 one in a workspace of
// op's (free gives it back).
func widen32(op string, ts ...*Tensor) (out [][]float32, free func()) {
	ns := make([]int, len(ts))
	for i, t := range ts {
		if t.dtype.IsHalf() {
			ns[i] = t.Numel()
		}
	}
	out, free = workspace32(op, ts[0].dev, ns...)
	for i, t := range ts {
		if t.dtype.IsHalf() {
			halfToF32(out[i], t)
		} else {
			out[i] = f32(t)
		}
	}
	return out, free
}
