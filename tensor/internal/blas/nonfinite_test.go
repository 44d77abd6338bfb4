package blas

import (
	"math"
	"testing"
)

// A zero of A times a NaN or an Inf of B is NaN (IEEE 754), and so is
// the sum it enters: PyTorch's CPU and CUDA products give NaN there
// (torch.mm(torch.zeros(2, 2), torch.tensor([[nan, 1.], [1., 1.]]))[0, 0]
// is nan, as is torch.zeros(1, 1) @ torch.tensor([[inf]])). gonum's GEMM
// skips the zeros of A (its axpy loops test alpha*a != 0), which turned
// those entries into 0: a NaN weight hidden behind a ReLU's zeros.
func TestGemmPropagatesNonFiniteB(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		t.Run("float32", func(t *testing.T) { gemmNonFiniteB[float32](t) })
		t.Run("float64", func(t *testing.T) { gemmNonFiniteB[float64](t) })
	})
}

func gemmNonFiniteB[T float](t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, tA := range bools() {
			for _, tB := range bools() {
				for _, s := range [][3]int{{1, 1, 1}, {2, 2, 2}, {4, 3, 5}, {1, 17, 9}, {17, 9, 1}, {65, 17, 33}} {
					m, n, k := s[0], s[1], s[2]
					a := make([]T, m*k) // zeros
					b := make([]T, k*n)
					for i := range b {
						b[i] = 1
					}
					// op(B)[k-1][n-1] is non-finite: C's column n-1 is NaN.
					if tB {
						b[(n-1)*k+k-1] = T(bad)
					} else {
						b[(k-1)*n+n-1] = T(bad)
					}
					c := make([]T, m*n)
					lda, ldb := k, n
					if tA {
						lda = m
					}
					if tB {
						ldb = k
					}
					if _, is64 := any(a).([]float64); is64 {
						Dgemm(tA, tB, m, n, k, 1, any(a).([]float64), lda, any(b).([]float64), ldb, 0, any(c).([]float64), n)
					} else {
						Sgemm(tA, tB, m, n, k, 1, any(a).([]float32), lda, any(b).([]float32), ldb, 0, any(c).([]float32), n)
					}
					for i := range m {
						for j := range n {
							v := float64(c[i*n+j])
							if want := j == n-1; math.IsNaN(v) != want || !want && v != 0 {
								t.Fatalf("tA %v tB %v (m, n, k) %v, B holding %v: C[%d][%d] = %v, want %v", tA, tB, s, bad, i, j, v, map[bool]string{true: "NaN", false: "0"}[want])
							}
						}
					}
				}
			}
		}
	}
}
