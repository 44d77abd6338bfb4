package blas

import "sync"

// A product with one row (m == 1: a vector times a matrix, what a language
// model's decoding step does for every weight) skips the blocking: packing
// B for the micro-kernel reads all of B once and then computes a 6-row
// tile of which 5 rows are padding, where a direct pass reads B once and
// computes only the row asked for. Rows of B stored n×k (op(B) = Bᵀ, the
// usual weight layout) are dot products with the row of A; rows stored
// k×n are added to C, scaled by A's elements. The sums run in a different
// order than the blocked kernel's, within the same error bound.

// gemvA pools the gathered row of A when A is stored transposed (its
// elements lda apart).
var gemvA = sync.Pool{New: func() any { return new([]float32) }}

// ownGemv computes a checked product with m == 1, n, k > 0, alpha != 0.
func ownGemv(p problem[float32]) {
	k, n := p.k, p.n
	x := p.a[:k]
	var buf *[]float32
	if p.tA && p.lda != 1 {
		buf = gemvA.Get().(*[]float32)
		if cap(*buf) < k {
			*buf = make([]float32, k)
		}
		x = (*buf)[:k]
		for i := range x {
			x[i] = p.a[i*p.lda]
		}
	}
	c := p.c[:n]
	if p.tB {
		for j := range c {
			s := p.alpha * dot32(x, p.b[j*p.ldb:j*p.ldb+k])
			if p.beta != 0 {
				s += p.beta * c[j]
			}
			c[j] = s
		}
	} else {
		switch p.beta {
		case 0: // C may hold anything, NaN included: never read it
			clear(c)
		case 1:
		default:
			for j := range c {
				c[j] *= p.beta
			}
		}
		for i, xi := range x {
			axpy32(c, p.alpha*xi, p.b[i*p.ldb:i*p.ldb+n])
		}
	}
	if buf != nil {
		gemvA.Put(buf)
	}
}

// dot32 is the dot product of a and b (len(b) >= len(a)) with eight
// partial sums, which the compiler keeps in registers.
func dot32(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
		s4 += a[i+4] * b[i+4]
		s5 += a[i+5] * b[i+5]
		s6 += a[i+6] * b[i+6]
		s7 += a[i+7] * b[i+7]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// axpy32 adds alpha*x to y (len(x) >= len(y)).
func axpy32(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += alpha * x[i]
		y[i+1] += alpha * x[i+1]
		y[i+2] += alpha * x[i+2]
		y[i+3] += alpha * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += alpha * x[i]
	}
}
