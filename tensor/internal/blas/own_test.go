package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTileKernel holds each assembly micro-kernel the CPU runs to its Go
// definition: every k from 1 to 9 (the unrolled loop and its remainder)
// and 256, with and without reading C, a padded ldc, and C poisoned with
// NaN where it must not be read.
func TestTileKernel(t *testing.T) {
	if len(kernels) == 0 {
		t.Skipf("no assembly kernel: %s", noKernel)
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, kr := range kernels {
		nr := kr.nr
		ldc := nr + 3
		for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 256} {
			for _, load := range bools() {
				ap := randSlice[float32](r, k*mr)
				bp := randSlice[float32](r, k*nr)
				c0 := randSlice[float32](r, (mr-1)*ldc+nr+2)
				if !load {
					for i := range c0 {
						c0[i] = float32(math.NaN())
					}
				}
				got := append([]float32(nil), c0...)
				want := append([]float32(nil), c0...)
				kr.run(k, ap, bp, got, ldc, -1.5, 0.75, load)
				tileGo(nr, k, ap, bp, want, ldc, -1.5, 0.75, load)
				for i := range got {
					if i/ldc >= mr || i%ldc >= nr { // outside the tile
						require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
							"%s k=%d load=%v: c[%d] outside the tile changed", kr.name, k, load, i)
						continue
					}
					require.InDelta(t, want[i], got[i], 1e-5*float64(k), "%s k=%d load=%v c[%d]", kr.name, k, load, i)
				}
			}
		}
	}
}

// TestOwnGemmBlocks runs the own GEMM directly on each kernel, assembly
// and Go (so the driver is tested whatever the CPU), on products that
// cross every cache block: k beyond kc (several k blocks, the later ones
// adding to C), m beyond mc, n beyond nc, with all four transposes,
// padded leading dimensions, and beta 0 on a NaN-poisoned C.
func TestOwnGemmBlocks(t *testing.T) {
	for _, kr := range append(append([]*microKernel(nil), kernels...), goKernels...) {
		t.Run(kr.name, func(t *testing.T) {
			b := ownBackend("forced by test", kr)
			b.s.small = b.s.big // tiny products too
			old := useBackend(b)
			defer useBackend(old)
			r := rand.New(rand.NewPCG(23, 24))
			for _, tA := range bools() {
				for _, tB := range bools() {
					checkOne[float32](t, r, padded(tA, tB, mc+mr+1, 37, 2*kc+5, 0.5, 0), 1)
					checkOne[float32](t, r, padded(tA, tB, 7, nc+kr.nr+3, kc+1, -1, 1), 1)
					checkOne[float32](t, r, tight(tA, tB, 129, 65, 5, 2, 0.5), 1)
				}
			}
		})
	}
}

// TestOwnGemmAllocates nothing once its panels are pooled.
func TestOwnGemmAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled items on purpose")
	}
	if !haveKernel {
		t.Skipf("no assembly kernel: %s", noKernel)
	}
	r := rand.New(rand.NewPCG(25, 26))
	a, b, c := randSlice[float32](r, 100*70), randSlice[float32](r, 70*50), make([]float32, 100*50)
	p := problem[float32]{m: 100, n: 50, k: 70, alpha: 1, a: a, lda: 70, b: b, ldb: 50, c: c, ldc: 50}
	for _, kr := range kernels {
		ownGemm(p, kr)
		require.Zero(t, testing.AllocsPerRun(20, func() { ownGemm(p, kr) }), kr.name)
	}
}

// TestOwnGemv: one-row products (the decoding step's) against the
// reference, every storage order, with padded leading dimensions, beta 0
// over a C of NaNs, and split over goroutines; and no allocation.
func TestOwnGemv(t *testing.T) {
	b := ownBackend("forced by test", bestKernel)
	b.s.small = b.s.big
	old := useBackend(b)
	defer useBackend(old)
	r := rand.New(rand.NewPCG(27, 28))
	for _, tA := range bools() {
		for _, tB := range bools() {
			for _, nk := range [][2]int{{1, 1}, {7, 13}, {33, 64}, {50257 / 7, 96}, {300, 1029}} {
				checkOne[float32](t, r, tight(tA, tB, 1, nk[0], nk[1], 1, 0), 1)
				checkOne[float32](t, r, padded(tA, tB, 1, nk[0], nk[1], -0.5, 1), 1)
				checkOne[float32](t, r, padded(tA, tB, 1, nk[0], nk[1], 2, 0.25), 2)
			}
		}
	}
	if !raceEnabled {
		a, bm, c := randSlice[float32](r, 64*3), randSlice[float32](r, 300*64), make([]float32, 300)
		p := problem[float32]{tA: true, tB: true, m: 1, n: 300, k: 64, alpha: 1, a: a, lda: 3, b: bm, ldb: 64, c: c, ldc: 300}
		ownGemv(p)
		require.Zero(t, testing.AllocsPerRun(20, func() { ownGemv(p) }))
	}
}

// TestDirectKernel holds each direct assembly kernel (A read where it
// lies) to its Go definition and to the packed kernel: every k from 1 to
// 9 and 256, A rows padded (lda > k) with NaN in the padding, which must
// not be read, and C as TestTileKernel's.
func TestDirectKernel(t *testing.T) {
	if len(kernels) == 0 {
		t.Skipf("no assembly kernel: %s", noKernel)
	}
	r := rand.New(rand.NewPCG(31, 32))
	for _, kr := range kernels {
		require.NotNil(t, kr.direct, kr.name)
		nr := kr.nr
		ldc := nr + 3
		for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 256} {
			lda := k + 5
			for _, load := range bools() {
				a := randSlice[float32](r, (mr-1)*lda+k)
				for i := range a {
					if i%lda >= k {
						a[i] = float32(math.NaN())
					}
				}
				bp := randSlice[float32](r, k*nr)
				c0 := randSlice[float32](r, (mr-1)*ldc+nr+2)
				got := append([]float32(nil), c0...)
				want := append([]float32(nil), c0...)
				kr.direct(k, a, lda, bp, got, ldc, -1.5, 0.75, load)
				tileGoDirect(nr, k, a, lda, bp, want, ldc, -1.5, 0.75, load)
				for i := range got {
					if i/ldc >= mr || i%ldc >= nr {
						require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s k=%d: c[%d] outside the tile changed", kr.name, k, i)
						continue
					}
					require.InDelta(t, want[i], got[i], 1e-5*float64(k), "%s k=%d load=%v c[%d]", kr.name, k, load, i)
				}
			}
		}
	}
}
