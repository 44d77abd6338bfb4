package blas

// Sgemm computes the row-major product C = alpha*op(A)*op(B) + beta*C in
// float32, where op(X) is X, or X^T when transX is true; op(A) is m×k,
// op(B) k×n and C m×n. A is stored m×k (k×m when transA) with lda
// elements between rows, B k×n (n×k when transB) with ldb, C with ldc.
// When beta == 0, C is overwritten without being read, so NaN or Inf in
// it does not survive; when alpha == 0 or k == 0, A and B are not read.
// C must not overlap A or B.
//
// Sgemm panics, naming the argument and the sizes, when a size is
// negative, a leading dimension is smaller than the width it steps over,
// or a slice is too short for the matrix it holds.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := problem[float32]{tA: transA, tB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	p.check("Sgemm", 0, 0, 0, 1)
	current().s.single(p)
}

// Dgemm is Sgemm in float64.
func Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	p := problem[float64]{tA: transA, tB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	p.check("Dgemm", 0, 0, 0, 1)
	current().d.single(p)
}

// SgemmStridedBatched computes batch products as Sgemm does, product i
// reading A from a[i*strideA:], B from b[i*strideB:] and writing C at
// c[i*strideC:]. A stride of 0 for A or B uses one matrix for the whole
// batch. The C matrices must not share elements (they are computed
// concurrently); they may interleave within rows, as when ldc >=
// batch*n and strideC == n.
//
// It panics, naming the argument and the sizes, on the conditions Sgemm
// panics on for any product of the batch, on a negative batch or stride,
// and on C matrices that overlap.
func SgemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int, batch int) {
	p := problem[float32]{tA: transA, tB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	p.check("SgemmStridedBatched", strideA, strideB, strideC, batch)
	current().s.batched(p, strides{strideA, strideB, strideC, batch})
}

// DgemmStridedBatched is SgemmStridedBatched in float64.
func DgemmStridedBatched(transA, transB bool, m, n, k int, alpha float64, a []float64, lda, strideA int, b []float64, ldb, strideB int, beta float64, c []float64, ldc, strideC int, batch int) {
	p := problem[float64]{tA: transA, tB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, lda: lda, b: b, ldb: ldb, c: c, ldc: ldc}
	p.check("DgemmStridedBatched", strideA, strideB, strideC, batch)
	current().d.batched(p, strides{strideA, strideB, strideC, batch})
}
