package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGemmShapes(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		t.Run("float32", func(t *testing.T) { gemmShapes[float32](t) })
		t.Run("float64", func(t *testing.T) { gemmShapes[float64](t) })
	})
}

// gemmShapes covers every transpose combination and every (m, n, k) from
// sizes {1, 3, 17, 65}, tight and padded, cycling through scalings that
// include beta == 0 on a NaN-poisoned C, beta == 1 and alpha != 1.
func gemmShapes[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 3, 17, 65}
	scalings := [][2]float64{{1, 0}, {-0.75, 1}, {2.5, 0.5}, {1, -1}, {0.5, 0}}
	i := 0
	for _, tA := range bools() {
		for _, tB := range bools() {
			for _, m := range sizes {
				for _, n := range sizes {
					for _, k := range sizes {
						for _, layout := range []func(bool, bool, int, int, int, float64, float64) case_{tight, padded} {
							s := scalings[i%len(scalings)]
							i++
							checkOne[T](t, r, layout(tA, tB, m, n, k, s[0], s[1]))
						}
					}
				}
			}
		}
	}
}

// TestGemmSplit runs products large enough to be split over goroutines,
// along rows (m >= n) and along columns, with 2, 3 and the default
// number of threads, and chunk counts that leave a short last piece.
func TestGemmSplit(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, tA := range bools() {
			for _, tB := range bools() {
				checkOne[float32](t, r, padded(tA, tB, 301, 97, 130, 1, 0), 0, 2, 3)
				checkOne[float64](t, r, tight(tA, tB, 70, 259, 129, -0.5, 1), 0, 2, 3)
			}
		}
	})
}

// TestGemmNoArithmetic covers the cases BLAS defines without a product:
// alpha == 0 or k == 0 scale C by beta and read neither A nor B (NaN
// there must not show), beta == 0 stores exact zeros, and m == 0 or
// n == 0 touches nothing, even with nil slices.
func TestGemmNoArithmetic(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		nan := float32(math.NaN())
		a := []float32{nan, nan, nan, nan, nan, nan}
		b := []float32{nan, nan, nan, nan, nan, nan}
		for _, beta := range []float32{0, 1, -2} {
			c := []float32{1, 2, nan, 3, 4, 5}
			if beta == 0 {
				c = []float32{nan, nan, 7, nan, nan, 8}
			}
			orig := append([]float32(nil), c...)
			Sgemm(false, false, 2, 2, 3, 0, a, 3, b, 3, beta, c, 3)
			for i := range 2 {
				for j := range 3 {
					x, o := c[i*3+j], orig[i*3+j]
					if j == 2 { // padding: untouched
						require.Equal(t, math.Float32bits(o), math.Float32bits(x))
						continue
					}
					want := float32(0)
					if beta != 0 {
						want = beta * o
					}
					require.Equal(t, want, x, "alpha=0 beta=%v c[%d]", beta, i*3+j)
				}
			}
			c64 := []float64{1, 2, 3, 4}
			if beta == 0 {
				c64 = []float64{math.NaN(), math.Inf(1), 5, math.NaN()}
			}
			want := make([]float64, 4)
			for i, v := range c64 {
				if beta != 0 {
					want[i] = float64(beta) * v
				}
			}
			Dgemm(true, true, 2, 2, 0, 1, nil, 2, nil, 1, float64(beta), c64, 2)
			require.Equal(t, want, c64, "k=0 beta=%v", beta)
		}
		Sgemm(false, false, 0, 5, 3, 1, nil, 3, nil, 5, 0, nil, 5)
		Dgemm(true, false, 4, 0, 3, 1, nil, 4, nil, 1, 0, nil, 1)
	})
}

// TestGemmWideLeadingDimension passes a leading dimension beyond the
// 32-bit integers of an LP64 library: a one-row A may have any lda, so
// this is a valid call, which the library path hands to gonum.
func TestGemmWideLeadingDimension(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		c := tight(false, false, 1, 19, 23, 1.5, 0)
		wide := int64(math.MaxInt32) + 7
		if int64(int(wide)) != wide {
			t.Skip("int has 32 bits")
		}
		c.lda = int(wide)
		checkOne[float32](t, r, c)
		checkOne[float64](t, r, c)
	})
}

// TestGemmConcurrentCallers runs independent products from several
// goroutines at once, as autograd may: the library is entered from
// several threads and the pooled call frames are shared.
func TestGemmConcurrentCallers(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		type job struct {
			c         case_
			a, b, cc  []float32
			want, mag []float64
		}
		r := rand.New(rand.NewPCG(7, 8))
		jobs := make([]job, 80)
		for i := range jobs {
			c := padded(i%2 == 0, i%3 == 0, 9+i%4, 33, 17+i, 1, 0.5)
			ar, ac, br, bc := c.dims()
			j := job{c: c, a: randSlice[float32](r, extent(ar, ac, c.lda)),
				b: randSlice[float32](r, extent(br, bc, c.ldb)), cc: randSlice[float32](r, extent(c.m, c.n, c.ldc))}
			j.want, j.mag = reference(c, j.a, j.b, j.cc)
			jobs[i] = j
		}
		done := make(chan struct{})
		for g := range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for i := g; i < len(jobs); i += 4 {
					gemm(jobs[i].c, jobs[i].a, jobs[i].b, jobs[i].cc)
				}
			}()
		}
		for range 4 {
			<-done
		}
		for _, j := range jobs {
			requireClose(t, j.c, j.cc, j.want, j.mag, "concurrent gemm")
		}
	})
}
