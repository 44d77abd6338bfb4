package tensor_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// The leak safety net catches a tensor nobody released wherever it was
// owned by no scope — made outside any scope, kept out of one, made in a
// role of a context with no scope open — and returns its storage; a
// tensor its scope owns needs no net (the scope releases it).
func TestLeakSafetyNet(t *testing.T) {
	mem := tensor.CPU().Memory()
	forget := map[string]func(){
		"made outside any scope": func() { _ = tensor.Zeros(tensor.CPU(), tensor.Float32, 256) },
		"kept out of its scope": func() {
			tensor.WithScope(func() { tensor.Keep(tensor.Zeros(tensor.CPU(), tensor.Float32, 256)) })
		},
		"a view of a kept tensor": func() {
			x := tensor.Zeros(tensor.CPU(), tensor.Float32, 256)
			tensor.Keep(x)
			_ = x.Narrow(0, 0, 16)
			x.Release()
		},
		"made in a role with no scope open": func() {
			c := tensor.NewCtx()
			c.WithRole(memory.RoleGradient, func() { _ = c.Zeros(tensor.CPU(), tensor.Float32, 256) })
		},
	}
	for name, f := range forget {
		t.Run(name, func(t *testing.T) {
			before, leaked := memtest.Settled(mem), tensor.LeakedTensors()
			f()
			require.Eventually(t, func() bool {
				runtime.GC()
				return tensor.LeakedTensors() == leaked+1
			}, 5*time.Second, 5*time.Millisecond, "the forgotten tensor is found")
			leakedOnPurpose.Add(1)
			require.Equal(t, before, memtest.Settled(mem), "its storage is returned")
		})
	}
	t.Run("owned by a closed scope", func(t *testing.T) {
		before, leaked := memtest.Settled(mem), tensor.LeakedTensors()
		tensor.WithScope(func() { _ = tensor.Zeros(tensor.CPU(), tensor.Float32, 256) })
		require.Equal(t, before, memtest.Settled(mem))
		require.Equal(t, leaked, tensor.LeakedTensors())
	})
}

// BenchmarkSmallOp is the host cost of an op on tiny tensors inside a
// scope (a training or decoding step's common case): 100 adds a scope, an
// output and a view each.
func BenchmarkSmallOp(b *testing.B) {
	x := tensor.Ones(tensor.CPU(), tensor.Float32, 4)
	y := tensor.Ones(tensor.CPU(), tensor.Float32, 4)
	tensor.Keep(x, y)
	defer x.Release()
	defer y.Release()
	c := tensor.NewCtx()
	b.ReportAllocs()
	for b.Loop() {
		c.WithScope(func() {
			for range 100 {
				tensor.Add(x, c.Adopt(y.Alias()))
			}
		})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/add")
}
