package tensor

import "github.com/strata-ml/strata/tensor/internal/blas"

// matmulHalf is the CPU's mixed-precision GEMM: float16 or bfloat16 a
// and b widened to float32 (exactly) and multiplied into c's own storage
// when c is float32, else into a float32 buffer (holding c widened when
// beta != 0) that is then rounded into c (to nearest even). The product
// accumulates in float32: what cublasGemmEx computes on the GPU with a
// float32 compute type, up to the order of the additions. The float32
// copies are a workspace from c's device's memory manager (workspace32),
// given back when the product ends or fails.
func matmulHalf(c, a, b *Tensor, tA, tB bool, m, n, k, batch, lda, ldb, sA, sB int, alpha, beta float64) {
	nc := 0
	if c.dtype != Float32 {
		nc = c.Numel()
	}
	ws, free := workspace32("MatMul", c.dev, a.Numel(), b.Numel(), nc)
	defer free()
	fa, fb, fc := ws[0], ws[1], ws[2]
	halfToF32(fa, a)
	halfToF32(fb, b)
	switch {
	case c.dtype == Float32:
		fc = f32(c)
	case beta != 0:
		halfToF32(fc, c)
	}
	blas.SgemmStridedBatched(tA, tB, m, n, k, float32(alpha), fa, lda, sA, fb, ldb, sB, float32(beta), fc, n, m*n, batch)
	if c.dtype != Float32 {
		f32ToHalf(c, fc)
	}
}
