package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reference every backend is held to: a float64 triple loop, and an
// error bound in the style of Higham's for a dot product of length k.

// case_ is one product in the type-independent form the tests build.
type case_ struct {
	tA, tB        bool
	m, n, k       int
	lda, ldb, ldc int
	alpha, beta   float64
}

// dims returns the stored shape of A and B.
func (c case_) dims() (ar, ac, br, bc int) {
	ar, ac = c.m, c.k
	if c.tA {
		ar, ac = c.k, c.m
	}
	br, bc = c.k, c.n
	if c.tB {
		br, bc = c.n, c.k
	}
	return
}

// tight returns a case with leading dimensions equal to the widths.
func tight(tA, tB bool, m, n, k int, alpha, beta float64) case_ {
	c := case_{tA: tA, tB: tB, m: m, n: n, k: k, alpha: alpha, beta: beta}
	_, ac, _, bc := c.dims()
	c.lda, c.ldb, c.ldc = max(1, ac), max(1, bc), max(1, n)
	return c
}

// padded returns a case whose leading dimensions exceed the widths.
func padded(tA, tB bool, m, n, k int, alpha, beta float64) case_ {
	c := tight(tA, tB, m, n, k, alpha, beta)
	c.lda += 3
	c.ldb += 5
	c.ldc += 2
	return c
}

func randSlice[T float](r *rand.Rand, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(2*r.Float64() - 1)
	}
	return s
}

// reference returns alpha*op(A)*op(B) + beta*C0 in float64 and the
// magnitude |alpha|*|op(A)|*|op(B)| + |beta|*|C0| that bounds rounding.
// Elements of C0 outside the matrix are returned unchanged.
func reference[T float](c case_, a, b, c0 []T) (want, mag []float64) {
	want = make([]float64, len(c0))
	mag = make([]float64, len(c0))
	for i := range c0 {
		want[i] = float64(c0[i])
	}
	// Element (i, l) of op(A) is a[i*ai+l*al]; (l, j) of op(B) is b[l*bl+j*bj].
	ai, al := c.lda, 1
	if c.tA {
		ai, al = 1, c.lda
	}
	bl, bj := c.ldb, 1
	if c.tB {
		bl, bj = 1, c.ldb
	}
	for i := range c.m {
		for j := range c.n {
			var s, sm float64
			for l := range c.k {
				p := float64(a[i*ai+l*al]) * float64(b[l*bl+j*bj])
				s += p
				sm += math.Abs(p)
			}
			idx := i*c.ldc + j
			old := float64(c0[idx])
			if c.beta == 0 {
				old = 0 // BLAS: C is not read
			}
			want[idx] = c.alpha*s + c.beta*old
			mag[idx] = math.Abs(c.alpha)*sm + math.Abs(c.beta*old)
		}
	}
	return want, mag
}

func epsOf[T float]() float64 {
	var z T
	if _, ok := any(z).(float32); ok {
		return 0x1p-23
	}
	return 0x1p-52
}

// requireClose checks got against want element by element, matrix and
// padding alike (padding must be left untouched), and fails on the first
// element out of bounds. (The comparison is plain Go: a testify call per
// element would dominate the run time.)
func requireClose[T float](t testing.TB, c case_, got []T, want, mag []float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	tol := 2 * float64(c.k+2) * epsOf[T]()
	for i := range got {
		g := float64(got[i])
		ok := math.Abs(g-want[i]) <= tol*mag[i]
		if math.IsNaN(want[i]) {
			ok = math.IsNaN(g)
		}
		if !ok {
			require.Failf(t, "wrong element", "%s: c[%d] = %v, want %v ± %.3g (%+v)",
				what, i, g, want[i], tol*mag[i], c)
		}
	}
}
