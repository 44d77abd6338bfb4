package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Edge cases of the nn ops and the random creation functions on the CPU,
// each checked against values computed here in float64.

// EmbeddingBackwardInto with a dout that views dtable's own storage must
// add dout's rows as they were before the op: the scatter-add writes a
// row of dtable before it reads that row again through dout.
func TestEmbeddingBackwardIntoAliasedDout(t *testing.T) {
	for _, c := range []struct {
		name            string
		rows, d, lo, hi int // dout is rows [lo, hi) of dtable
		ids             []int32
	}{
		{"swap", 4, 2, 0, 2, []int32{1, 0}},
		{"itself", 3, 2, 0, 3, []int32{2, 0, 1}},
		{"parallel", 512, 256, 100, 400, nil}, // over the kernel's serial grain
	} {
		t.Run(c.name, func(t *testing.T) {
			tensor.WithScope(func() {
				ids := c.ids
				if ids == nil {
					rng := rand.New(rand.NewPCG(3, 4))
					ids = make([]int32, c.hi-c.lo)
					for i := range ids {
						ids[i] = int32(rng.IntN(c.rows))
					}
				}
				table := make([]float64, c.rows*c.d)
				for i := range table {
					table[i] = float64(i%97) - 48.5
				}
				want := append([]float64(nil), table...)
				for i, id := range ids {
					src := table[(c.lo+i)*c.d : (c.lo+i+1)*c.d]
					for j, v := range src {
						want[int(id)*c.d+j] += v
					}
				}
				dtable := tensor.FromFloat64s(cpu, table, c.rows, c.d)
				dout := dtable.Narrow(0, c.lo, c.hi-c.lo)
				tensor.EmbeddingBackwardInto(dtable, tensor.FromInt32s(cpu, ids), dout)
				requireSameFloats(t, want, dtable.Float64s())
			})
		})
	}
}

// requireSameFloats fails at the first element where got differs from
// want, naming it (a diff of thousands of elements helps no one).
func requireSameFloats(t *testing.T, want, got []float64) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if got[i] != want[i] {
			require.Failf(t, "values differ", "element %d is %v, want %v", i, got[i], want[i])
		}
	}
}

// heapBytes returns the bytes fn allocated on the Go heap.
func heapBytes(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The creation functions that fill a host buffer (RandN, RandUniform,
// Arange) ask the memory manager for the tensor first: when it refuses,
// the op fails with its out-of-memory error before the host buffer of n
// values is made. Asking after the buffer, a shape too large for the
// machine crashed the process in Go's fatal out-of-memory instead of
// returning the manager's error. Here the manager refuses an n whose
// buffer is a harmless 32 MiB, and the test checks that no such buffer
// was allocated.
func TestCreationAsksTheManagerFirst(t *testing.T) {
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(1, 2))
	m := cpu.Memory()
	for name, op := range map[string]func(){
		"RandN":          func() { tensor.RandN(cpu, tensor.Float64, rng, 1, n).Release() },
		"RandN32":        func() { tensor.RandN(cpu, tensor.Float32, rng, 1, 2, n/2).Release() },
		"RandUniform":    func() { tensor.RandUniform(cpu, tensor.Float64, rng, 0, 1, n).Release() },
		"RandUniform32":  func() { tensor.RandUniform(cpu, tensor.Float32, rng, 0, 1, n).Release() },
		"ArangeFloat64":  func() { tensor.Arange(cpu, tensor.Float64, 0, n).Release() },
		"ArangeFloat32":  func() { tensor.Arange(cpu, tensor.Float32, 0, n).Release() },
		"ArangeInt32":    func() { tensor.Arange(cpu, tensor.Int32, 0, n).Release() },
		"RandNFloat16":   func() { tensor.RandN(cpu, tensor.Float16, rng, 1, n).Release() },
		"ArangeBFloat16": func() { tensor.Arange(cpu, tensor.BFloat16, 0, n).Release() },
	} {
		t.Run(name, func(t *testing.T) {
			for fail := int64(1); fail <= 2; fail++ { // the output, then a float64 staging tensor
				var err error
				used := heapBytes(func() {
					m.FailAllocation(fail)
					defer m.FailAllocation(0)
					err = tensor.Try(op)
				})
				if fail == 2 && err == nil { // one allocation only
					continue
				}
				require.ErrorIs(t, err, memory.ErrOutOfMemory, "allocation %d", fail)
				require.Less(t, used, uint64(n), "allocation %d failed after %d bytes of host buffer", fail, used)
			}
		})
	}
}

// The values themselves are those of the host buffer, converted as
// FromFloats converts them, and a shape without dims still gives one
// value of shape [1].
func TestCreationValues(t *testing.T) {
	tensor.WithScope(func() {
		rng := rand.New(rand.NewPCG(7, 8))
		want := make([]float64, 6)
		for i := range want {
			want[i] = rng.NormFloat64() * 0.5
		}
		rng = rand.New(rand.NewPCG(7, 8))
		x := tensor.RandN(cpu, tensor.Float32, rng, 0.5, 2, 3)
		require.Equal(t, []int{2, 3}, x.Shape())
		for i, v := range x.Float32s() {
			require.Equal(t, float32(want[i]), v)
		}

		rng = rand.New(rand.NewPCG(7, 8))
		u := rng.Float64()
		rng = rand.New(rand.NewPCG(7, 8))
		s := tensor.RandUniform(cpu, tensor.Float64, rng, -2, 3)
		require.Equal(t, []int{1}, s.Shape())
		require.Equal(t, []float64{-2 + 5*u}, s.Float64s())

		require.Equal(t, []float64{-2, -1, 0, 1}, tensor.Arange(cpu, tensor.Float64, -2, 4).Float64s())
		require.Equal(t, []int32{5, 6, 7}, tensor.Arange(cpu, tensor.Int32, 5, 3).Int32s())
		require.Equal(t, []int{0}, tensor.Arange(cpu, tensor.Float32, 5, 0).Shape())
	})
}

// RandN and RandUniform of a shape whose element count overflows int are
// refused with ErrShape, as New refuses it, not a runtime error from
// making a buffer of a wrapped (negative) length.
func TestRandOverflowingShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, op := range []func(){
		func() { tensor.RandN(cpu, tensor.Float32, rng, 1, 1<<62, 3) },
		func() { tensor.RandUniform(cpu, tensor.Float32, rng, 0, 1, 3, 1<<62) },
	} {
		err := recovered(op)
		var oe *tensor.OpError
		require.ErrorAs(t, err, &oe)
		require.ErrorIs(t, err, tensor.ErrShape)
	}
}

// recovered runs fn and returns what it panicked with as an error (Try
// lets panics other than *OpError through).
func recovered(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	fn()
	return nil
}
