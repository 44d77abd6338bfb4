package tensor

import "github.com/strata-ml/strata/tensor/internal/cpukern"

// The CPU's fused attention runs cpukern's blockwise kernels in the
// accumulation dtype; float16 and bfloat16 inputs are widened to float32
// first (exactly), which is what the GPU's loads do.

func (cpuBackend) attentionForward(out, lse, q, k, v *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	if q.dtype == Float64 {
		cpukern.AttentionForward(f64(out), f64(lse), f64(q), f64(k), f64(v), bh, t, hd, scale, p, seed, offset)
		return
	}
	qs, ks, vs := widen32(q), widen32(k), widen32(v)
	cpukern.AttentionForward(f32(out), f32(lse), qs, ks, vs, bh, t, hd, scale, p, seed, offset)
}

func (cpuBackend) attentionBackward(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	if q.dtype == Float64 {
		cpukern.AttentionBackward(f64(dq), f64(dk), f64(dv), f64(q), f64(k), f64(v), f64(out), f64(dout), f64(lse), bh, t, hd, scale, p, seed, offset)
		return
	}
	qs, ks, vs := widen32(q), widen32(k), widen32(v)
	cpukern.AttentionBackward(f32(dq), f32(dk), f32(dv), qs, ks, vs, f32(out), f32(dout), f32(lse), bh, t, hd, scale, p, seed, offset)
}

// widen32 returns contiguous t's elements as float32: its own data for
// float32, a widened copy for float16 and bfloat16.
func widen32(t *Tensor) []float32 {
	if t.dtype == Float32 {
		return f32(t)
	}
	s := make([]float32, t.Numel())
	halfToF32(s, t)
	return s
}
