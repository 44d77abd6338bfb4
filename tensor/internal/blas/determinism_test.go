package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemmBitsIndependentOfThreads holds every backend that splits
// products itself (the own GEMM on each kernel, assembly and Go, and the
// library when installed) to giving the same bits whatever SetThreads
// says: a training run with a fixed seed must come out bit-identical on
// a 2-core and a 16-core machine. Each shape is chosen to cut a piece
// that once took another path than the same rows unsplit:
//
//   - 33 rows cut at 16 leave a last piece of one row, which the own
//     GEMM computed as a vector product (own_gemv.go, another order of
//     the sums);
//   - 33 columns, or 100 rows, cut at 16 (not a multiple of the 6×32 or
//     6×16 tile) turn elements of full tiles into edge tiles, whose
//     merge into C must round beta*C + alpha*acc as the kernel does;
//   - 2^18 rows on 65 threads leave a last piece of 16 rows, below
//     tinyWork, which must not go to gonum when the whole product did
//     not.
//
// Each case is also run as a batch of two, which on more threads than
// matrices splits each matrix.
func TestGemmBitsIndependentOfThreads(t *testing.T) {
	type shape struct {
		tA, tB      bool
		m, n, k     int
		alpha, beta float64
		threads     []int
	}
	usual := []int{2, 3, 5, 8}
	shapes := []shape{
		{false, false, 33, 32, 2048, 0.7, 0, usual},
		{true, true, 33, 32, 2048, -1.3, 0.5, usual},
		{false, true, 32, 33, 2048, 0.7, 0.3, usual},
		{true, false, 100, 64, 384, 1.1, -0.75, usual},
		{false, false, 1 << 18, 2, 4, 0.7, 0.3, []int{2, 8, 65}},
	}
	for _, b := range splittingBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			old := useBackend(b.b)
			defer useBackend(old)
			for _, s := range shapes {
				c := tight(s.tA, s.tB, s.m, s.n, s.k, s.alpha, s.beta)
				t.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(t *testing.T) {
					if b.b.s.split {
						requireSameBits[float32](t, c, s.threads)
					}
					if b.b.d.split {
						requireSameBits[float64](t, c, s.threads)
					}
				})
			}
		})
	}
}

type namedBackend struct {
	name string
	b    *backend
}

// splittingBackends lists the backends whose products SetThreads splits:
// the library (when installed) and the own GEMM on every kernel, the Go
// ones included so that the driver is held to it in every build. gonum
// is left out: it splits over GOMAXPROCS goroutines by its own fixed
// 64×64 blocks, which SetThreads does not reach.
func splittingBackends(t *testing.T) []namedBackend {
	var bs []namedBackend
	if lib := discovered(); lib.lib != nil {
		bs = append(bs, namedBackend{"library", lib})
	} else {
		t.Logf("no BLAS library (%s): the own GEMM alone is tested", lib.reason)
	}
	for _, kr := range append(append([]*microKernel(nil), kernels...), goKernels...) {
		bs = append(bs, namedBackend{"go/" + kr.name, ownBackend("forced by test", kr)})
	}
	return bs
}

// requireSameBits computes c, alone and as a batch of two, on one thread
// and then on each count of threads, and requires every element of C to
// have the same bits each time.
func requireSameBits[T float](t *testing.T, c case_, threads []int) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(c.m), uint64(c.n*c.k)))
	ar, ac, br, bc := c.dims()
	sa, sb, sc := extent(ar, ac, c.lda), extent(br, bc, c.ldb), extent(c.m, c.n, c.ldc)
	a := randSlice[T](r, 2*sa)
	b := randSlice[T](r, 2*sb)
	c0 := randSlice[T](r, 2*sc)
	run := func(n, batch int) []T {
		cc := append([]T(nil), c0...)
		withThreads(n, func() {
			if batch == 1 {
				gemm(c, a, b, cc)
			} else {
				gemmBatched(c, a, sa, b, sb, cc, sc, batch)
			}
		})
		return cc
	}
	for _, batch := range []int{1, 2} {
		want := run(1, batch)
		for _, n := range threads {
			got := run(n, batch)
			what := fmt.Sprintf("%T %+v, batch %d: %d threads against 1", *new(T), c, batch, n)
			require.Empty(t, bitDiff(got, want, c.ldc), what)
		}
	}
}

// bitDiff describes the elements whose bits differ (the first few and
// how many; "" when none). It is plain Go: a testify call per element
// would dominate the run time.
func bitDiff[T float](got, want []T, ldc int) string {
	n, first := 0, ""
	for i := range got {
		if bitsOf(got[i]) == bitsOf(want[i]) {
			continue
		}
		if n < 3 {
			first += fmt.Sprintf(" c[%d][%d] = %v, want %v;", i/ldc, i%ldc, got[i], want[i])
		}
		n++
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d elements differ:%s", n, len(got), first)
}

func bitsOf[T float](v T) uint64 {
	switch v := any(v).(type) {
	case float32:
		return uint64(math.Float32bits(v))
	case float64:
		return math.Float64bits(v)
	}
	panic("unreachable")
}
