package cpukern

import (
	"fmt"
	"math"
	"testing"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// GPT shapes: the CPU reference config (tiny: batch 16, context 64, width
// 128, 4 heads, MLP 512, vocab 256) gives 1024 token rows; attention
// scores are 16*4*64 rows of 64.
const (
	benchRows     = 1024
	benchAttnRows = 16 * 4 * 64
)

var sinkF32 float32

// runBench times f with b.Loop and reports, besides wall-clock MB/s, the
// process CPU time per op and the bytes moved per CPU-nanosecond
// (cpu-GB/s): on a loaded machine the CPU-time figures stay close to the
// kernel's own cost while wall time does not.
func runBench(b *testing.B, bytes int64, f func()) {
	b.Helper()
	b.SetBytes(bytes)
	c0 := processCPU()
	for b.Loop() {
		f()
	}
	if c := processCPU() - c0; c > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(bytes)*float64(b.N)/float64(c.Nanoseconds()), "cpu-GB/s")
	}
}

func benchF32(n int) []float32 { return randSlice[float32](newRNG(uint64(n)), n, -3, 3) }

func BenchmarkBinaryBiasAdd(b *testing.B) {
	for _, cols := range []int{128, 512} {
		b.Run(fmt.Sprintf("%dx%d", benchRows, cols), func(b *testing.B) {
			x, bias, y := benchF32(benchRows*cols), benchF32(cols), make([]float32, benchRows*cols)
			l := merged([]int{benchRows, cols}, []int{cols, 1}, []int{0, 1})
			runBench(b, int64(4*(2*benchRows*cols+cols)), func() {
				Binary(ops.Add, y, l, x, 0, bias, 0)
			})
			sinkF32 += y[0]
		})
	}
}

func BenchmarkBinaryAdd(b *testing.B) {
	n := benchRows * 128
	x, z, y := benchF32(n), benchF32(n), make([]float32, n)
	l := merged([]int{n}, []int{1}, []int{1})
	runBench(b, int64(12*n), func() {
		Binary(ops.Add, y, l, x, 0, z, 0)
	})
	sinkF32 += y[0]
}

func BenchmarkSoftmax(b *testing.B) {
	for _, sh := range [][2]int{{benchAttnRows, 64}, {benchRows, 256}} {
		rows, cols := sh[0], sh[1]
		b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
			x, y := benchF32(rows*cols), make([]float32, rows*cols)
			runBench(b, int64(8*rows*cols), func() {
				Softmax(y, x, rows, cols)
			})
			sinkF32 += y[0]
		})
		b.Run(fmt.Sprintf("causal/%dx%d", rows, cols), func(b *testing.B) {
			// Attention scores after CausalMask: about half the row is -Inf.
			x, y := benchF32(rows*cols), make([]float32, rows*cols)
			CausalMask(x, x, rows/cols, cols, cols, float32(math.Inf(-1)))
			runBench(b, int64(8*rows*cols), func() {
				Softmax(y, x, rows, cols)
			})
			sinkF32 += y[0]
		})
		b.Run(fmt.Sprintf("backward/%dx%d", rows, cols), func(b *testing.B) {
			x, y, dy := benchF32(rows*cols), make([]float32, rows*cols), benchF32(rows*cols)
			Softmax(y, x, rows, cols)
			runBench(b, int64(12*rows*cols), func() {
				SoftmaxBackward(x, y, dy, rows, cols)
			})
			sinkF32 += x[0]
		})
	}
}

func BenchmarkCausalMask(b *testing.B) {
	x := benchF32(benchAttnRows * 64)
	runBench(b, int64(8*len(x)), func() {
		CausalMask(x, x, 16*4, 64, 64, -1e30)
	})
}

func BenchmarkLayerNorm(b *testing.B) {
	for _, cols := range []int{128, 768} {
		n := benchRows * cols
		x, y, w, bb := benchF32(n), make([]float32, n), benchF32(cols), benchF32(cols)
		mean, rstd := make([]float32, benchRows), make([]float32, benchRows)
		b.Run(fmt.Sprintf("forward/%dx%d", benchRows, cols), func(b *testing.B) {
			runBench(b, int64(8*n), func() {
				LayerNorm(y, mean, rstd, x, w, bb, benchRows, cols, 1e-5)
			})
		})
		b.Run(fmt.Sprintf("backward/%dx%d", benchRows, cols), func(b *testing.B) {
			dy, dx, dw, db := benchF32(n), make([]float32, n), make([]float32, cols), make([]float32, cols)
			LayerNorm(y, mean, rstd, x, w, bb, benchRows, cols, 1e-5)
			runBench(b, int64(12*n), func() {
				LayerNormBackward(dx, dw, db, dy, x, mean, rstd, w, benchRows, cols)
			})
			sinkF32 += dx[0]
		})
	}
}

func BenchmarkGelu(b *testing.B) {
	n := benchRows * 512
	x, y, dy := benchF32(n), make([]float32, n), benchF32(n)
	b.Run("forward/1024x512", func(b *testing.B) {
		runBench(b, int64(8*n), func() {
			Unary(ops.Gelu, y, x)
		})
	})
	b.Run("backward/1024x512", func(b *testing.B) {
		runBench(b, int64(12*n), func() {
			GeluBackward(y, x, dy)
		})
	})
	sinkF32 += y[0]
}

func BenchmarkExp(b *testing.B) {
	n := benchRows * 128
	x, y := benchF32(n), make([]float32, n)
	runBench(b, int64(8*n), func() {
		Unary(ops.Exp, y, x)
	})
	sinkF32 += y[0]
}

func BenchmarkCrossEntropy(b *testing.B) {
	const cols = 256
	n := benchRows * cols
	logits, d := benchF32(n), make([]float32, n)
	targets := randTargets(benchRows, cols, 1)
	loss, dloss := make([]float32, benchRows), make([]float32, benchRows)
	Fill(dloss, 1.0/benchRows)
	b.Run("forward/1024x256", func(b *testing.B) {
		runBench(b, int64(4*n), func() {
			if _, err := CrossEntropy(loss, logits, targets, benchRows, cols, ignoreIndex); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("backward/1024x256", func(b *testing.B) {
		runBench(b, int64(8*n), func() {
			CrossEntropyBackward(d, logits, targets, dloss, benchRows, cols, ignoreIndex)
		})
	})
	sinkF32 += loss[0] + d[0]
}

func BenchmarkReduceSumBiasGrad(b *testing.B) {
	const cols = 512
	dy, db := benchF32(benchRows*cols), make([]float32, cols)
	runBench(b, int64(4*len(dy)), func() {
		ReduceSum(db, dy, 1, benchRows, cols, true)
	})
	sinkF32 += db[0]
}

func BenchmarkDropout(b *testing.B) {
	n := benchRows * 512
	x, y := benchF32(n), make([]float32, n)
	runBench(b, int64(8*n), func() {
		Dropout(y, x, 0.1, 7, 0)
	})
	sinkF32 += y[0]
}

func BenchmarkAdamW(b *testing.B) {
	const n = 1 << 20
	p, g, m, v := benchF32(n), benchF32(n), make([]float32, n), make([]float32, n)
	step := 0
	runBench(b, int64(28*n), func() { // read p, g, m, v; write p, m, v
		step++
		AdamW(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.1, step)
	})
}

// BenchmarkAdamWGPT2 is one AdamW step over gpt2's 124M float32
// parameters in host memory (2 GB of parameters, gradients and moments):
// the host-CPU update of ZeRO-Offload-style optimizer offload, against
// which the device's update over PCIe is compared (issue 10). It is
// memory-bound: run it with -test.cpu set to the host's cores.
func BenchmarkAdamWGPT2(b *testing.B) {
	const n = 124_439_808
	p, g, m, v := benchF32(n), benchF32(n), make([]float32, n), make([]float32, n)
	step := 0
	runBench(b, int64(28*n), func() {
		step++
		AdamW(p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.1, step)
	})
}

func BenchmarkTranspose(b *testing.B) {
	x, y := benchF32(512*512), make([]float32, 512*512)
	l := merged([]int{512, 512}, []int{1, 512})
	runBench(b, int64(8*len(x)), func() {
		CopyStrided(y, l, x, 0)
	})
	sinkF32 += y[0]
}

func BenchmarkEmbedding(b *testing.B) {
	const dim, vocab = 128, 256
	table, out := benchF32(vocab*dim), make([]float32, benchRows*dim)
	ids := randTargets(benchRows, vocab, 3)
	for i := range ids {
		ids[i] &= 0xff
	}
	b.Run("gather", func(b *testing.B) {
		runBench(b, int64(8*len(out)), func() {
			_ = Gather(out, table, ids, dim, vocab)
		})
	})
	b.Run("scatter-add", func(b *testing.B) {
		runBench(b, int64(12*len(out)), func() {
			_ = ScatterAdd(table, out, ids, dim, vocab)
		})
	})
}
