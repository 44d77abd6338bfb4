package blas

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks report GFLOP/s (2*m*n*k per product) for the shapes the GPT
// runs: `go test -run x -bench . -benchtime 200x`. Each runs on the
// library (when installed), the own kernel (where the CPU has it) and
// gonum.

type benchShape struct {
	name    string
	tA, tB  bool
	m, n, k int
	batch   int
}

var benchShapes = []benchShape{
	{"1024x1024x1024", false, false, 1024, 1024, 1024, 1},
	// tiny GPT (width 128, 4*width MLP, vocab 256), batch 16 × context 64 = 1024 rows.
	{"qkv_1024x128@128x384", false, false, 1024, 384, 128, 1},
	{"fc_1024x128@(512x128)T", false, true, 1024, 512, 128, 1},
	{"proj_1024x512@512x128", false, false, 1024, 128, 512, 1},
	{"logits_1024x128@(256x128)T", false, true, 1024, 256, 128, 1},
	// Backward: weight gradients A^T·B over the 1024 rows, input gradients A·B^T.
	{"dW_(1024x128)T@1024x384", true, false, 128, 384, 1024, 1},
	{"dW_(1024x512)T@1024x128", true, false, 512, 128, 1024, 1},
	{"dW_(1024x128)T@1024x512", true, false, 128, 512, 1024, 1},
	{"dW_(1024x128)T@1024x256", true, false, 128, 256, 1024, 1},
	{"dX_1024x384@(128x384)T", false, true, 1024, 128, 384, 1},
	// Attention: 16 sequences × 4 heads, context 64, head width 32.
	{"attn_64x(64x32@(64x32)T)", false, true, 64, 64, 32, 64},
	{"attn_64x(64x64@64x32)", false, false, 64, 32, 64, 64},
	{"attn_64x(64x32@32x64)", false, false, 64, 64, 32, 64},
	{"attn_64x((64x64)T@64x32)", true, false, 64, 32, 64, 64},
	{"small_64x64x64", false, false, 64, 64, 64, 1},
	{"small_128x128x128", false, false, 128, 128, 128, 1},
	{"small_256x256x256", false, false, 256, 256, 256, 1},
}

// benchOperands allocates random operands for s.
func benchOperands(s benchShape) (c case_, a, b, cc []float32) {
	c = tight(s.tA, s.tB, s.m, s.n, s.k, 1, 0)
	r := rand.New(rand.NewPCG(1, 1))
	a = randSlice[float32](r, s.batch*s.m*s.k)
	b = randSlice[float32](r, s.batch*s.k*s.n)
	cc = randSlice[float32](r, s.batch*s.m*s.n)
	return
}

// runShape times s with the backend and thread setting in force.
func runShape(b *testing.B, s benchShape) {
	c, x, y, z := benchOperands(s)
	b.SetBytes(int64(4 * s.batch * (s.m*s.k + s.k*s.n + s.m*s.n)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s.batch == 1 {
			Sgemm(c.tA, c.tB, c.m, c.n, c.k, 1, x, c.lda, y, c.ldb, 0, z, c.ldc)
		} else {
			SgemmStridedBatched(c.tA, c.tB, c.m, c.n, c.k, 1, x, c.lda, s.m*s.k, y, c.ldb, s.k*s.n,
				0, z, c.ldc, s.m*s.n, s.batch)
		}
	}
	flops := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(s.batch)
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkSgemm(b *testing.B) {
	for _, name := range []string{"library", "go", "gonum"} {
		be := gonumBackend("forced by benchmark")
		switch name {
		case "library":
			if be = discovered(); be.lib == nil {
				continue
			}
		case "go":
			if !haveKernel {
				continue
			}
			be = ownBackend("forced by benchmark", bestKernel)
		}
		for _, s := range benchShapes {
			b.Run(fmt.Sprintf("%s/%s", name, s.name), func(b *testing.B) {
				old := useBackend(be)
				defer useBackend(old)
				runShape(b, s)
			})
		}
	}
}

// BenchmarkSgemmTiny times products around tinyWork, where the fixed
// cost of a call into the library meets gonum's.
func BenchmarkSgemmTiny(b *testing.B) {
	lib := discovered()
	if lib.lib == nil {
		b.Skip("no library")
	}
	for _, n := range []int{2, 4, 6, 8, 12} {
		for _, be := range []*backend{lib, gonumBackend("benchmark")} {
			name := "library"
			if be.lib == nil {
				name = "gonum"
			}
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				old := useBackend(be)
				defer useBackend(old)
				// Call the kernels directly: Sgemm itself routes these to gonum.
				x := randSlice[float32](rand.New(rand.NewPCG(1, 1)), n*n)
				p := problem[float32]{m: n, n: n, k: n, alpha: 1, a: x, lda: n, b: x, ldb: n, c: make([]float32, n*n), ldc: n}
				b.ReportAllocs()
				for b.Loop() {
					be.s.big(p)
				}
			})
		}
	}
}
