package tensor

import (
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// These tests need a GPU; without one they skip with the reason (or fail
// when STRATA_REQUIRE_GPU is set).

func gpuForTest(t testing.TB) *cudaDevice {
	t.Helper()
	dev, err := CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	return dev.(*cudaDevice)
}

// TestCUDADriverCallsPerOp counts the driver calls each op makes once the
// memory pool is warm: one launch for most primitives, a few for the
// multi-pass ones, and a synchronization where a result goes to the host.
func TestCUDADriverCallsPerOp(t *testing.T) {
	d := gpuForTest(t)
	if memoryGuard {
		t.Skipf("%s adds driver calls to every release", EnvMemoryGuard)
	}
	runtime.LockOSThread() // a thread the context is already current on
	defer runtime.UnlockOSThread()
	rng := rand.New(rand.NewPCG(1, 2))
	WithScope(func() {
		x := RandN(d, Float32, rng, 1, 64, 768)
		w, bias := RandN(d, Float32, rng, 1, 768), RandN(d, Float32, rng, 1, 768)
		wm := RandN(d, Float32, rng, 1, 768, 768)
		ids := FromInt32s(d, []int32{1, 5, 7, 1}, 4)
		table := RandN(d, Float32, rng, 1, 10, 768)
		logits := RandN(d, Float32, rng, 1, 4, 50257)
		g, m, v := RandN(d, Float32, rng, 1, 64, 768), Zeros(d, Float32, 64, 768), Zeros(d, Float32, 64, 768)
		_, mean, rstd := LayerNorm(x, w, bias, 1e-5)
		cases := []struct {
			name string
			max  uint64
			op   func()
		}{
			{"Add", 1, func() { Add(x, x) }},
			{"Add/bias", 1, func() { Add(x, bias) }},
			{"Gelu", 1, func() { Gelu(x) }},
			{"Sum/rows", 1, func() { Sum(x, false, 1) }},
			{"Sum/all", 2, func() { Sum(x, false) }},
			{"Softmax", 1, func() { Softmax(x) }},
			{"Transpose.Clone", 1, func() { x.T().Clone() }},
			{"LayerNorm", 1, func() { LayerNorm(x, w, bias, 1e-5) }},
			{"LayerNormBackward", 5, func() { LayerNormBackward(x, x, mean, rstd, w, true) }}, // 2 fills + dx + 2 for dw/db
			{"MatMul", 2, func() { MatMul(x, wm) }},                                           // cuCtxSetCurrent + cublasSgemm
			{"Embedding", 1, func() { Embedding(table, ids) }},
			{"CrossEntropy", 3, func() { CrossEntropy(logits, ids, -100) }}, // loss, count, synchronize
			{"Dropout", 1, func() { Dropout(x, 0.1, 1, 0) }},
			{"AdamW", 1, func() { AdamWStep(x, g, m, v, 1e-3, 0.9, 0.95, 1e-8, 0.1, 1) }},
		}
		for _, c := range cases {
			WithScope(c.op) // warm the pool and the thread
			before := cuda.DriverCalls()
			WithScope(c.op)
			n := cuda.DriverCalls() - before
			t.Logf("%-18s %d driver calls", c.name, n)
			require.LessOrEqual(t, n, c.max, c.name)
		}
	})
	require.NoError(t, d.Synchronize())
}

// BenchmarkCUDAOps times a few hot primitives on cuda:0 (synchronizing
// after each batch), reporting bytes moved per second.
func BenchmarkCUDAOps(b *testing.B) {
	d := gpuForTest(b)
	rng := rand.New(rand.NewPCG(1, 2))
	WithScope(func() {
		x := RandN(d, Float32, rng, 1, 8*1024, 768)
		w, bias := RandN(d, Float32, rng, 1, 768), RandN(d, Float32, rng, 1, 768)
		logits := RandN(d, Float32, rng, 1, 64, 50257)
		bench := func(name string, bytes int64, op func()) {
			b.Run(name, func(b *testing.B) {
				b.SetBytes(bytes)
				for b.Loop() {
					WithScope(op)
				}
				require.NoError(b, d.Synchronize())
			})
		}
		bench("Add/8Kx768", 3*x.Bytes(), func() { Add(x, x) })
		bench("Softmax/64x50257", 2*logits.Bytes(), func() { Softmax(logits) })
		bench("Sum/cols/8Kx768", x.Bytes(), func() { Sum(x, false, 0) })
		bench("Transpose/8Kx768", 2*x.Bytes(), func() { x.T().Clone() })
		bench("LayerNorm/8Kx768", 2*x.Bytes(), func() { LayerNorm(x, w, bias, 1e-5) })
		bench("LayerNormTo/bf16/8Kx768", x.Bytes()+x.Bytes()/2, func() { LayerNormTo(x, w, bias, 1e-5, BFloat16) })
	})
}
