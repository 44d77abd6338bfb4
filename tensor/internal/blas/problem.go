package blas

import "math"

// float is the element type of a product: the package instantiates its
// generic code for float32 (Sgemm) and float64 (Dgemm) only.
type float interface{ float32 | float64 }

// problem is one row-major product C = alpha*op(A)*op(B) + beta*C with
// op(A) m×k, op(B) k×n and C m×n. A is stored m×k (k×m when tA), B k×n
// (n×k when tB); lda, ldb, ldc are the element distances between rows.
type problem[T float] struct {
	tA, tB      bool
	m, n, k     int
	alpha, beta T
	a           []T
	lda         int
	b           []T
	ldb         int
	c           []T
	ldc         int
}

// work is m*n*k, the number of multiply-adds, used to choose a strategy.
func (p *problem[T]) work() int { return mulSat(mulSat(p.m, p.n), p.k) }

// rows returns the sub-product that computes rows [lo, hi) of C.
func (p *problem[T]) rows(lo, hi int) problem[T] {
	q := *p
	q.m = hi - lo
	if p.tA {
		q.a = p.a[lo:]
	} else {
		q.a = p.a[lo*p.lda:]
	}
	q.c = p.c[lo*p.ldc:]
	return q
}

// cols returns the sub-product that computes columns [lo, hi) of C.
func (p *problem[T]) cols(lo, hi int) problem[T] {
	q := *p
	q.n = hi - lo
	if p.tB {
		q.b = p.b[lo*p.ldb:]
	} else {
		q.b = p.b[lo:]
	}
	q.c = p.c[lo:]
	return q
}

// entry returns matrix i of a strided batch.
func (p *problem[T]) entry(i, strideA, strideB, strideC int) problem[T] {
	q := *p
	q.a = p.a[i*strideA:]
	q.b = p.b[i*strideB:]
	q.c = p.c[i*strideC:]
	return q
}

// scaleC sets C = beta*C: the whole product when alpha == 0 or k == 0,
// where BLAS reads neither A nor B. beta == 0 stores exact zeros, so NaN
// or Inf already in C does not survive.
func (p *problem[T]) scaleC() {
	if p.beta == 1 {
		return
	}
	for i := range p.m {
		row := p.c[i*p.ldc : i*p.ldc+p.n]
		if p.beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= p.beta
		}
	}
}

// extent is the number of elements a rows×cols matrix with leading
// dimension ld spans: the minimum slice length that holds it.
func extent(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return addSat(mulSat(rows-1, ld), cols)
}

// mulSat and addSat are x*y and x+y for non-negative operands, saturating
// at math.MaxInt: a length check must not wrap around to a small number
// and let the library read past a slice.
func mulSat(x, y int) int {
	if x == 0 || y == 0 {
		return 0
	}
	if x > math.MaxInt/y {
		return math.MaxInt
	}
	return x * y
}

func addSat(x, y int) int {
	if x > math.MaxInt-y {
		return math.MaxInt
	}
	return x + y
}
