package tensor

// widenForGemm is the CPU's mixed-precision GEMM's operands: float16 or
// bfloat16 a and b widened to float32 (exactly), and the float32 product
// slice, c's own storage when c is float32, else a buffer (holding c
// widened when beta != 0) that store rounds into c (to nearest even).
// The product accumulates in float32: what cublasGemmEx computes on the
// GPU with a float32 compute type, up to the order of the additions.
func widenForGemm(c, a, b *Tensor, beta float64) (fa, fb, fc []float32, store func()) {
	fa = make([]float32, a.Numel())
	halfToF32(fa, a)
	fb = make([]float32, b.Numel())
	halfToF32(fb, b)
	if c.dtype == Float32 {
		return fa, fb, f32(c), func() {}
	}
	fc = make([]float32, c.Numel())
	if beta != 0 {
		halfToF32(fc, c)
	}
	return fa, fb, fc, func() { f32ToHalf(c, fc) }
}
