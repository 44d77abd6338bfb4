package blas

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTileKernel holds the micro-kernel in force (the assembly on amd64)
// to its Go definition: every k from 1 to 9 (the unrolled loop and its
// remainder) and 256, with and without reading C, a padded ldc, and C
// poisoned with NaN where it must not be read.
func TestTileKernel(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const ldc = nr + 3
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
			tile(k, ap, bp, got, ldc, -1.5, 0.75, load)
			tileGo(k, ap, bp, want, ldc, -1.5, 0.75, load)
			for i := range got {
				inTile := i/ldc < mr && i%ldc < nr
				if !inTile {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "k=%d load=%v: c[%d] outside the tile changed", k, load, i)
					continue
				}
				require.InDelta(t, want[i], got[i], 1e-5*float64(k), "k=%d load=%v c[%d]", k, load, i)
			}
		}
	}
}

// TestOwnGemmBlocks runs the own kernel directly (whatever the CPU: the Go
// micro-kernel stands in where the assembly cannot run) on products that
// cross every cache block: k beyond kc (several k blocks, the later ones
// adding to C), m beyond mc, n beyond nc, with all four transposes,
// padded leading dimensions, and beta 0 on a NaN-poisoned C.
func TestOwnGemmBlocks(t *testing.T) {
	old := useBackend(&backend{own: true, reason: "forced by test",
		s: engine[float32]{big: ownGemm32, small: ownGemm32},
		d: engine[float64]{big: gonumGemm64, small: gonumGemm64}})
	defer useBackend(old)
	r := rand.New(rand.NewPCG(23, 24))
	for _, tA := range bools() {
		for _, tB := range bools() {
			checkOne[float32](t, r, padded(tA, tB, mc+mr+1, 37, 2*kc+5, 0.5, 0), 1)
			checkOne[float32](t, r, padded(tA, tB, 7, nc+nr+3, kc+1, -1, 1), 1)
			checkOne[float32](t, r, tight(tA, tB, 129, 65, 5, 2, 0.5), 1)
		}
	}
}

// TestOwnGemmAllocates nothing once its panels are pooled.
func TestOwnGemmAllocates(t *testing.T) {
	if !haveKernel {
		t.Skipf("no own kernel: %s", noKernel)
	}
	r := rand.New(rand.NewPCG(25, 26))
	a, b, c := randSlice[float32](r, 100*70), randSlice[float32](r, 70*50), make([]float32, 100*50)
	p := problem[float32]{m: 100, n: 50, k: 70, alpha: 1, a: a, lda: 70, b: b, ldb: 50, c: c, ldc: 50}
	ownGemm32(p)
	require.Zero(t, testing.AllocsPerRun(20, func() { ownGemm32(p) }))
}
