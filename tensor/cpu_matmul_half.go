package tensor

import "github.com/strata-ml/strata/tensor/internal/blas"

// matmulHalfCPU is the CPU's mixed-precision GEMM: float16 or bfloat16
// operands are widened to float32 (exactly), multiplied with float32
// accumulation, and the product is stored in c's dtype, float32 or the
// operands' half type (rounded to nearest even). It computes what
// cublasGemmEx computes on the GPU with a float32 compute type, up to
// the order of the additions. With beta != 0 a half c is widened first.
func matmulHalfCPU(c, a, b *Tensor, tA, tB bool, m, n, k, batch, sA, sB int, alpha, beta float64) {
	lda, ldb := k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	fa := make([]float32, a.Numel())
	halfToF32(fa, a)
	fb := make([]float32, b.Numel())
	halfToF32(fb, b)
	var fc []float32
	if c.dtype == Float32 {
		fc = f32(c)
	} else {
		fc = make([]float32, c.Numel())
		if beta != 0 {
			halfToF32(fc, c)
		}
	}
	blas.SgemmStridedBatched(tA, tB, m, n, k, float32(alpha), fa, lda, sA, fb, ldb, sB, float32(beta), fc, n, m*n, batch)
	if c.dtype != Float32 {
		f32ToHalf(c, fc)
	}
}
