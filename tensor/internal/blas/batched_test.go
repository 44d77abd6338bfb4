package blas

import (
	"math"
	"math/rand/v2"
	"testing"
)

// layout is how the matrices of a batch sit in their slices.
type layout struct {
	name       string
	sa, sb, sc int // strides; -1 means "one matrix extent plus a gap"
	interleave bool
}

// batchCase runs one strided batch of c once for each thread count
// (none: the setting in force) and checks every matrix against the
// reference, the padding and gaps included (they must be untouched; with
// beta == 0 they start NaN and must stay so).
func batchCase[T float](t *testing.T, r *rand.Rand, c case_, batch int, l layout, threads ...int) {
	t.Helper()
	ar, ac, br, bc := c.dims()
	ea, eb := extent(ar, ac, c.lda), extent(br, bc, c.ldb)
	sa, sb, sc := l.sa, l.sb, l.sc
	if sa < 0 {
		sa = ea + 3
	}
	if sb < 0 {
		sb = eb + 1
	}
	if l.interleave {
		// Matrices side by side in rows: C_i starts at column i*n.
		sc = c.n
		c.ldc = batch*c.n + 2
	} else if sc < 0 {
		sc = extent(c.m, c.n, c.ldc) + 5
	}
	a := randSlice[T](r, (batch-1)*sa+ea)
	b := randSlice[T](r, (batch-1)*sb+eb)
	c0 := randSlice[T](r, (batch-1)*sc+extent(c.m, c.n, c.ldc))
	if c.beta == 0 {
		for i := range c0 {
			c0[i] = T(math.NaN())
		}
	}
	// Everything outside the matrices keeps its value (and gets no
	// tolerance); each matrix gets its own reference.
	want := make([]float64, len(c0))
	mag := make([]float64, len(c0))
	for i, v := range c0 {
		want[i] = float64(v)
	}
	for i := range batch {
		w, m := reference(c, a[i*sa:], b[i*sb:], c0[i*sc:i*sc+extent(c.m, c.n, c.ldc)])
		for row := range c.m {
			for col := range c.n {
				j := row*c.ldc + col
				want[i*sc+j], mag[i*sc+j] = w[j], m[j]
			}
		}
	}
	if len(threads) == 0 {
		threads = []int{int(threadSetting.Load())}
	}
	for _, n := range threads {
		cc := append([]T(nil), c0...)
		withThreads(n, func() { gemmBatched(c, a, sa, b, sb, cc, sc, batch) })
		requireClose(t, c, cc, want, mag, l.name)
	}
}

var layouts = []layout{
	{name: "gaps", sa: -1, sb: -1, sc: -1},
	{name: "broadcastA", sa: 0, sb: -1, sc: -1},
	{name: "broadcastB", sa: -1, sb: 0, sc: -1},
	{name: "interleavedC", sa: -1, sb: -1, interleave: true},
}

func TestGemmStridedBatched(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		t.Run("float32", func(t *testing.T) { batchedShapes[float32](t) })
		t.Run("float64", func(t *testing.T) { batchedShapes[float64](t) })
	})
}

// batchedShapes covers transposes, odd sizes, padded leading dimensions,
// the four layouts, beta 0 (poisoned), 1 and other, and batches of 1, 3
// and 7 (small enough to run serially).
func batchedShapes[T float](t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	shapes := [][3]int{{1, 1, 1}, {3, 17, 1}, {17, 3, 65}, {65, 17, 3}, {5, 7, 9}}
	scalings := [][2]float64{{1, 0}, {-1.5, 1}, {0.5, 0.25}}
	i := 0
	for _, tA := range bools() {
		for _, tB := range bools() {
			for _, s := range shapes {
				for _, batch := range []int{1, 3, 7} {
					for _, l := range layouts {
						sc := scalings[i%len(scalings)]
						i++
						mk := tight
						if i%2 == 0 {
							mk = padded
						}
						batchCase[T](t, r, mk(tA, tB, s[0], s[1], s[2], sc[0], sc[1]), batch, l)
					}
				}
			}
		}
	}
}

// TestGemmStridedBatchedParallel runs batches large enough to be spread
// over goroutines (the attention shapes of the GPT), batches with fewer
// matrices than threads (each matrix split instead), and uneven counts.
func TestGemmStridedBatchedParallel(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(13, 14))
		for _, l := range layouts {
			batchCase[float32](t, r, tight(false, false, 64, 64, 32, 0.125, 0), 37, l, 0, 2, 3)
			batchCase[float32](t, r, tight(false, true, 64, 32, 64, 1, 1), 16, l, 0, 2, 3)
			batchCase[float64](t, r, tight(true, false, 33, 40, 64, 1, 0), 29, l, 0, 2, 3)
		}
		batchCase[float32](t, r, padded(true, true, 160, 150, 100, 1, 0), 2, layouts[0], 0, 2, 3)
	})
}

// TestGemmStridedBatchedNoArithmetic: alpha == 0 and k == 0 scale every
// C by beta without reading A or B, and batch == 0 does nothing.
func TestGemmStridedBatchedNoArithmetic(t *testing.T) {
	forEachBackend(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(15, 16))
		for _, l := range layouts {
			batchCase[float32](t, r, tight(false, false, 4, 5, 6, 0, 0), 5, l)
			batchCase[float64](t, r, tight(true, false, 4, 5, 6, 0, -2), 5, l)
			batchCase[float32](t, r, tight(false, true, 4, 5, 0, 1, 0), 3, l)
		}
		SgemmStridedBatched(false, false, 3, 3, 3, 1, nil, 3, 9, nil, 3, 9, 0, nil, 3, 9, 0)
		DgemmStridedBatched(false, false, 3, 0, 3, 1, nil, 3, 9, nil, 1, 9, 0, nil, 1, 9, 4)
	})
}
