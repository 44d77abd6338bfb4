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
//
// gonum skips the zeros of A (its axpy loops test alpha*a != 0), so a
// zero of A times a NaN or an Inf of B, NaN in IEEE arithmetic and in
// OpenBLAS, cuBLAS and PyTorch, would leave that term out: both
// wrappers put the NaN back (nanFromSkippedZeros).

func gonumGemm32(p problem[float32]) {
	gonum.Implementation{}.Sgemm(trans(p.tA), trans(p.tB), p.m, p.n, p.k,
		p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
	nanFromSkippedZeros(p)
}

func gonumGemm64(p problem[float64]) {
	gonum.Implementation{}.Dgemm(trans(p.tA), trans(p.tB), p.m, p.n, p.k,
		p.alpha, p.a, p.lda, p.b, p.ldb, p.beta, p.c, p.ldc)
	nanFromSkippedZeros(p)
}

// nanFromSkippedZeros sets C[i][j] to NaN where alpha*op(A)[i][l] == 0
// (the terms gonum skips) and op(B)[l][j] is NaN or ±Inf for some l:
// each such term makes the whole sum NaN. It reads A once (m·k, small
// beside the product's m·n·k) and row l of op(B) only where column l of
// op(A) holds such a zero. alpha == 0 reads neither operand (BLAS's rule).
func nanFromSkippedZeros[T float](p problem[T]) {
	if p.alpha == 0 || p.m == 0 || p.n == 0 || p.k == 0 {
		return
	}
	var buf [256]bool
	var zero []bool // zero[l]: column l of op(A) holds a skipped zero
	if p.k <= len(buf) {
		zero = buf[:p.k]
	} else {
		zero = make([]bool, p.k)
	}
	found := false
	if p.tA { // A stored k×m: column l of op(A) is row l of A
		for l := range p.k {
			for _, v := range p.a[l*p.lda : l*p.lda+p.m] {
				if p.alpha*v == 0 {
					zero[l], found = true, true
					break
				}
			}
		}
	} else {
		for i := range p.m {
			for l, v := range p.a[i*p.lda : i*p.lda+p.k] {
				if p.alpha*v == 0 {
					zero[l], found = true, true
				}
			}
		}
	}
	if !found {
		return
	}
	at := func(i, l int) T {
		if p.tA {
			return p.a[l*p.lda+i]
		}
		return p.a[i*p.lda+l]
	}
	bt := func(l, j int) T {
		if p.tB {
			return p.b[j*p.ldb+l]
		}
		return p.b[l*p.ldb+j]
	}
	zeroT := T(0)
	nan := zeroT / zeroT
	for l, z := range zero {
		if !z {
			continue
		}
		bad := false
		for j := range p.n {
			if v := bt(l, j); v-v != 0 { // NaN or ±Inf
				bad = true
				break
			}
		}
		if !bad {
			continue
		}
		for i := range p.m {
			if p.alpha*at(i, l) != 0 {
				continue
			}
			c := p.c[i*p.ldc : i*p.ldc+p.n]
			for j := range p.n {
				if v := bt(l, j); v-v != 0 {
					c[j] = nan
				}
			}
		}
	}
}

func trans(t bool) gblas.Transpose {
	if t {
		return gblas.Trans
	}
	return gblas.NoTrans
}
