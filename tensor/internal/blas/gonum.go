package blas

import (
	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The pure-Go fallback: gonum's blocked GEMM (64×64 blocks, SSE inner
// loops for float32 and float64, its own goroutines over the blocks of
// one product when there are at least four). It is also the path for
// products too small to be worth a call into C, and for sizes beyond the
// 32-bit integers of an LP64 library.

func gonumGemm32(p problem[float32]) {
	gonum.Implementation{}.Sgemm(trans(p.tA), trans(p.tB), p.m, p.n, p.k,
		p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
}

func gonumGemm64(p problem[float64]) {
	gonum.Implementation{}.Dgemm(trans(p.tA), trans(p.tB), p.m, p.n, p.k,
		p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
}

func trans(t bool) gblas.Transpose {
	if t {
		return gblas.Trans
	}
	return gblas.NoTrans
}
