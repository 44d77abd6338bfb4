package blas

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckPanics feeds each entry point inconsistent arguments and
// requires a panic whose message names the entry point, the argument and
// the sizes.
func TestCheckPanics(t *testing.T) {
	s := make([]float32, 64)
	d := make([]float64, 64)
	cases := []struct {
		name, want string
		call       func()
	}{
		{"negative m", "blas.Sgemm: negative size m=-1 n=2 k=2",
			func() { Sgemm(false, false, -1, 2, 2, 1, s, 2, s, 2, 0, s, 2) }},
		{"lda short", "blas.Sgemm: lda=2 is less than max(1, 3), the width of A as stored (4×3)",
			func() { Sgemm(false, false, 4, 2, 3, 1, s, 2, s, 2, 0, s, 2) }},
		{"lda short transposed", "blas.Dgemm: lda=3 is less than max(1, 4), the width of A as stored (3×4, transposed)",
			func() { Dgemm(true, false, 4, 2, 3, 1, d, 3, d, 2, 0, d, 2) }},
		{"ldb short transposed", "blas.Sgemm: ldb=2 is less than max(1, 3), the width of B as stored (5×3, transposed)",
			func() { Sgemm(false, true, 4, 5, 3, 1, s, 3, s, 2, 0, s, 5) }},
		{"ldc short", "blas.Dgemm: ldc=4 is less than max(1, 5)",
			func() { Dgemm(false, false, 2, 5, 3, 1, d, 3, d, 5, 0, d, 4) }},
		{"ldb zero with empty B", "blas.Sgemm: ldb=0 is less than max(1, 0)",
			func() { Sgemm(false, false, 2, 0, 3, 1, s, 3, s, 0, 0, s, 1) }},
		{"a short", "blas.Sgemm: len(a)=64 is short: A (10×7) with lda=7 needs 70 elements",
			func() { Sgemm(false, false, 10, 2, 7, 1, s, 7, s, 2, 0, s, 2) }},
		{"c short", "blas.Dgemm: len(c)=64 is short: C (8×9) with ldc=9 needs 72 elements",
			func() { Dgemm(false, false, 8, 9, 1, 1, d, 1, d, 9, 0, d, 9) }},
		{"c short, beta only", "blas.Sgemm: len(c)=3 is short",
			func() { Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 1, s[:3], 2) }},
		{"huge lda wraps", "blas.Sgemm: len(a)=64 is short",
			func() { Sgemm(false, false, 3, 2, 2, 1, s, math.MaxInt/2, s, 2, 0, s, 2) }},
		{"negative batch", "blas.SgemmStridedBatched: negative batch -1",
			func() { SgemmStridedBatched(false, false, 2, 2, 2, 1, s, 2, 4, s, 2, 4, 0, s, 2, 4, -1) }},
		{"negative stride", "blas.DgemmStridedBatched: negative stride strideA=0 strideB=-4 strideC=4",
			func() { DgemmStridedBatched(false, false, 2, 2, 2, 1, d, 2, 0, d, 2, -4, 0, d, 2, 4, 2) }},
		{"batch a short", "blas.SgemmStridedBatched: len(a)=64 is short: 9 matrices A (2×2) with lda=2, strideA=8 need 68 elements",
			func() { SgemmStridedBatched(false, false, 2, 2, 2, 1, s, 2, 8, s, 2, 0, 0, s, 2, 4, 9) }},
		{"batch c overlaps", "blas.SgemmStridedBatched: the 3 C matrices (2×2, ldc=2) overlap with strideC=3",
			func() { SgemmStridedBatched(false, false, 2, 2, 2, 1, s, 2, 4, s, 2, 4, 0, s, 2, 3, 3) }},
		{"batch c interleave too wide", "blas.DgemmStridedBatched: the 3 C matrices (2×2, ldc=5) overlap with strideC=2",
			func() { DgemmStridedBatched(false, false, 2, 2, 2, 1, d, 2, 4, d, 2, 4, 0, d, 5, 2, 3) }},
		{"batch c stride 0", "overlap with strideC=0",
			func() { SgemmStridedBatched(false, false, 2, 2, 2, 1, s, 2, 0, s, 2, 0, 1, s, 2, 0, 2) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r, "no panic")
				require.Contains(t, r, c.want)
			}()
			c.call()
		})
	}
}

// TestCheckAccepts covers valid calls at the edges of the checks: slices
// exactly as long as needed, unread operands absent, interleaved C.
func TestCheckAccepts(t *testing.T) {
	s := make([]float32, 64)
	require.NotPanics(t, func() {
		Sgemm(false, false, 3, 4, 5, 1, s[:15], 5, s[:20], 4, 0, s[:12], 4) // exact extents
	})
	require.NotPanics(t, func() { Sgemm(false, false, 3, 4, 5, 0, nil, 5, nil, 4, 1, s[:12], 4) })
	require.NotPanics(t, func() {
		// Three 2×2 matrices side by side in rows of 6.
		SgemmStridedBatched(false, false, 2, 2, 2, 1, s, 2, 4, s, 2, 0, 0, s[:12], 6, 2, 3)
	})
}
