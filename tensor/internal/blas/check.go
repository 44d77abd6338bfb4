package blas

import "fmt"

// The checks below are the last line of defence: callers (the tensor ops)
// validate shapes and report errors first, so reaching a panic here is a
// bug in the caller. Each message names the entry point, the argument and
// the sizes it was checked against, so that the bug is found from the
// message alone.

// check panics unless a batch of products p, consecutive matrices
// strideA, strideB, strideC elements apart, lies inside its slices, and
// unless no two C matrices of the batch share an element (they may be
// written concurrently). A single product is a batch of one. Only what
// BLAS reads is required: A and B need no elements when k == 0 or
// alpha == 0, nothing does when m or n is 0. C matrices may interleave
// within rows, as attention heads written side by side into one (T, H*D)
// output do.
func (p *problem[T]) check(op string, strideA, strideB, strideC, batch int) {
	if p.m < 0 || p.n < 0 || p.k < 0 {
		panic(fmt.Sprintf("blas.%s: negative size m=%d n=%d k=%d", op, p.m, p.n, p.k))
	}
	if batch < 0 {
		panic(fmt.Sprintf("blas.%s: negative batch %d", op, batch))
	}
	if strideA < 0 || strideB < 0 || strideC < 0 {
		panic(fmt.Sprintf("blas.%s: negative stride strideA=%d strideB=%d strideC=%d",
			op, strideA, strideB, strideC))
	}
	ar, ac := p.m, p.k
	if p.tA {
		ar, ac = p.k, p.m
	}
	br, bc := p.k, p.n
	if p.tB {
		br, bc = p.n, p.k
	}
	checkLd(op, "a", "A", p.tA, ar, ac, p.lda)
	checkLd(op, "b", "B", p.tB, br, bc, p.ldb)
	checkLd(op, "c", "C", false, p.m, p.n, p.ldc)
	if p.m == 0 || p.n == 0 || batch == 0 {
		return
	}
	if p.k > 0 && p.alpha != 0 {
		checkLen(op, "a", "A", p.tA, ar, ac, p.lda, len(p.a), strideA, batch)
		checkLen(op, "b", "B", p.tB, br, bc, p.ldb, len(p.b), strideB, batch)
	}
	checkLen(op, "c", "C", false, p.m, p.n, p.ldc, len(p.c), strideC, batch)
	if batch == 1 {
		return
	}
	disjoint := strideC >= extent(p.m, p.n, p.ldc) ||
		(strideC >= p.n && addSat(mulSat(batch-1, strideC), p.n) <= p.ldc)
	if !disjoint {
		panic(fmt.Sprintf("blas.%s: the %d C matrices (%d×%d, ldc=%d) overlap with strideC=%d",
			op, batch, p.m, p.n, p.ldc, strideC))
	}
}

func checkLd(op, arg, name string, trans bool, rows, cols, ld int) {
	if ld < max(1, cols) {
		panic(fmt.Sprintf("blas.%s: ld%s=%d is less than max(1, %d), the width of %s as stored (%s)",
			op, arg, ld, cols, name, storage(rows, cols, trans)))
	}
}

func checkLen(op, arg, name string, trans bool, rows, cols, ld, n, stride, batch int) {
	need := addSat(mulSat(batch-1, stride), extent(rows, cols, ld))
	if n >= need {
		return
	}
	if batch == 1 {
		panic(fmt.Sprintf("blas.%s: len(%s)=%d is short: %s (%s) with ld%s=%d needs %d elements",
			op, arg, n, name, storage(rows, cols, trans), arg, ld, need))
	}
	panic(fmt.Sprintf("blas.%s: len(%s)=%d is short: %d matrices %s (%s) with ld%s=%d, stride%s=%d need %d elements",
		op, arg, n, batch, name, storage(rows, cols, trans), arg, ld, name, stride, need))
}

func storage(rows, cols int, trans bool) string {
	if trans {
		return fmt.Sprintf("%d×%d, transposed", rows, cols)
	}
	return fmt.Sprintf("%d×%d", rows, cols)
}
