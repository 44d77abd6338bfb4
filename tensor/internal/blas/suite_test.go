package blas

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Every conformance test runs on each backend: the system library when
// one is installed (skipped, saying why, when not), the package's own
// GEMM with each assembly kernel the CPU runs, and gonum, forced through
// useBackend.
func forEachBackend(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	names := []string{"library"}
	for _, kr := range kernels {
		names = append(names, "go/"+kr.name)
	}
	if len(kernels) == 0 {
		names = append(names, "go")
	}
	for _, name := range append(names, "gonum") {
		t.Run(name, func(t *testing.T) {
			b := gonumBackend("forced by test")
			switch {
			case name == "library":
				if b = discovered(); b.lib == nil {
					t.Skipf("no BLAS library: %s", b.reason)
				}
			case name == "go":
				t.Skipf("no assembly kernel: %s", noKernel)
			case strings.HasPrefix(name, "go/"):
				for _, kr := range kernels {
					if name == "go/"+kr.name {
						b = ownBackend("forced by test", kr)
					}
				}
			}
			old := useBackend(b)
			defer useBackend(old)
			f(t)
		})
	}
}

// withThreads runs f with SetThreads(n) in force.
func withThreads(n int, f func()) {
	old := threadSetting.Load()
	SetThreads(n)
	defer threadSetting.Store(old)
	f()
}

// gemm and gemmBatched call the public entry point for T.
func gemm[T float](c case_, a, b, cc []T) {
	switch a := any(a).(type) {
	case []float32:
		Sgemm(c.tA, c.tB, c.m, c.n, c.k, float32(c.alpha), a, c.lda, any(b).([]float32), c.ldb,
			float32(c.beta), any(cc).([]float32), c.ldc)
	case []float64:
		Dgemm(c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, c.lda, any(b).([]float64), c.ldb,
			c.beta, any(cc).([]float64), c.ldc)
	}
}

func gemmBatched[T float](c case_, a []T, sa int, b []T, sb int, cc []T, sc, batch int) {
	switch a := any(a).(type) {
	case []float32:
		SgemmStridedBatched(c.tA, c.tB, c.m, c.n, c.k, float32(c.alpha), a, c.lda, sa,
			any(b).([]float32), c.ldb, sb, float32(c.beta), any(cc).([]float32), c.ldc, sc, batch)
	case []float64:
		DgemmStridedBatched(c.tA, c.tB, c.m, c.n, c.k, c.alpha, a, c.lda, sa,
			any(b).([]float64), c.ldb, sb, c.beta, any(cc).([]float64), c.ldc, sc, batch)
	}
}

// checkOne builds random operands for c, runs it once for each thread
// count (none: the setting in force) and compares with the reference.
// With beta == 0, C (padding included) starts as NaN: the matrix must
// come out clean and the padding must stay NaN.
func checkOne[T float](t *testing.T, r *rand.Rand, c case_, threads ...int) {
	t.Helper()
	ar, ac, br, bc := c.dims()
	a := randSlice[T](r, extent(ar, ac, c.lda))
	b := randSlice[T](r, extent(br, bc, c.ldb))
	c0 := randSlice[T](r, extent(c.m, c.n, c.ldc))
	if c.beta == 0 {
		for i := range c0 {
			c0[i] = T(math.NaN())
		}
	}
	want, mag := reference(c, a, b, c0)
	if len(threads) == 0 {
		threads = []int{int(threadSetting.Load())}
	}
	for _, n := range threads {
		cc := append([]T(nil), c0...)
		withThreads(n, func() { gemm(c, a, b, cc) })
		requireClose(t, c, cc, want, mag, "gemm")
	}
}

func bools() []bool { return []bool{false, true} }
