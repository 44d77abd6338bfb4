package tensor_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// halfOn returns a (rows, cols) tensor of dtype dt on dev, made on the
// default CPU and copied over: nothing but its own bytes is allocated on
// dev, so a tight budget there holds it.
func halfOn(t testing.TB, dev tensor.Device, dt tensor.DType, seed uint64, shape ...int) *tensor.Tensor {
	t.Helper()
	var out *tensor.Tensor
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := c.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(seed, 1)), 1, shape...).To(dt)
		out = x.ToDevice(dev)
		tensor.Keep(out)
	})
	return out
}

// The CPU's half-precision GEMM widens its operands (and a half result)
// to float32. Those temporaries come from the device's memory manager: a
// host budget that holds the operands and the result but not them makes
// the product an out-of-memory *OpError that leaks nothing, and a budget
// that holds them counts them.
func TestHalfMatMulTemporariesUnderHostBudget(t *testing.T) {
	const m, k, n = 256, 4096, 256 // a and b 2 MiB each in half, 4 MiB each widened
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			ref := tensor.CPU()
			want := func() []float32 {
				a, b := halfOn(t, ref, dt, 1, m, k), halfOn(t, ref, dt, 2, k, n)
				defer releaseAll(a, b)
				y := tensor.MatMul(a, b)
				defer y.Release()
				return y.Float32s()
			}()

			// Tight: the operands and the result fit, their float32 copies do not.
			mgr := memory.NewBudgetHostManager(memory.Config{}, memory.NewHostBudget(8<<20, "test"))
			dev := tensor.NewCPUDevice(mgr)
			a, b := halfOn(t, dev, dt, 1, m, k), halfOn(t, dev, dt, 2, k, n)
			c := halfOn(t, dev, dt, 3, m, n)
			tight := []*tensor.Tensor{a, b, c}
			defer func() { releaseAll(tight...) }()
			before := memtest.Settled(mgr)
			for name, op := range map[string]func(){
				"MatMul":           func() { releaseAll(tensor.MatMul(a, b)) },
				"MatMulFloat32Out": func() { releaseAll(tensor.MatMulWith(a, b, 1, tensor.MatMulMode{Float32Out: true})) },
				"MatMulInto":       func() { tensor.MatMulInto(c, a, b, 0.5, tensor.MatMulMode{}) },
			} {
				err := tensor.Try(op)
				require.ErrorIs(t, err, memory.ErrOutOfMemory, "%s under a budget that cannot hold the float32 operands", name)
				var oe *tensor.OpError
				require.True(t, errors.As(err, &oe), "%s: %v is not an *OpError", name, err)
				assert.Contains(t, oe.Op, "MatMul", name)
				assert.Equal(t, before, memtest.Settled(mgr), "%s: bytes in use after running out of memory", name)
			}
			releaseAll(tight...)
			tight = nil
			require.Zero(t, memtest.Settled(mgr))

			// Roomy: the product succeeds, gives the same bits, and the
			// manager saw the temporaries.
			mgr = memory.NewBudgetHostManager(memory.Config{}, memory.NewHostBudget(64<<20, "test"))
			dev = tensor.NewCPUDevice(mgr)
			a, b = halfOn(t, dev, dt, 1, m, k), halfOn(t, dev, dt, 2, k, n)
			defer releaseAll(a, b)
			before = memtest.Settled(mgr)
			mgr.ResetPeaks()
			y := tensor.MatMul(a, b)
			got := y.Float32s()
			y.Release()
			require.Equal(t, want, got)
			peak := mgr.Stats().Total.Requested.Peak
			assert.GreaterOrEqual(t, peak-before, int64(4*(m*k+k*n+m*n)), "the float32 copies of a, b and the result are not counted")
			assert.Equal(t, before, memtest.Settled(mgr), "bytes in use after the product")
		})
	}
}

// Fused attention widens half q, k and v to float32 on the CPU; the
// copies come from the device's manager (its peak sees them).
func TestHalfAttentionTemporariesCounted(t *testing.T) {
	const bh, seq, hd = 2, 64, 32
	nq := int64(bh * seq * hd)
	mgr := memory.NewHostManager(memory.Config{})
	dev := tensor.NewCPUDevice(mgr)
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		q := halfOn(t, dev, dt, 4, bh, seq, hd)
		k := halfOn(t, dev, dt, 5, bh, seq, hd)
		v := halfOn(t, dev, dt, 6, bh, seq, hd)
		before := memtest.Settled(mgr)
		mgr.ResetPeaks()
		out, lse := tensor.FusedCausalAttention(q, k, v, 0, 0, 0)
		outputs := out.Bytes() + lse.Bytes()
		peak := mgr.Stats().Total.Requested.Peak
		assert.GreaterOrEqual(t, peak-before, outputs+3*4*nq, "%v forward: float32 copies of q, k, v not counted", dt)

		mgr.ResetPeaks()
		base := mgr.InUse()
		dq, dk, dv := tensor.FusedCausalAttentionBackward(q, k, v, out, lse, out, 0, 0, 0)
		peak = mgr.Stats().Total.Requested.Peak
		assert.GreaterOrEqual(t, peak-base, 3*4*nq+3*4*nq, "%v backward: float32 copies of q, k, v not counted", dt)
		releaseAll(out, lse, dq, dk, dv, q, k, v)
		assert.Zero(t, memtest.Settled(mgr))
	}
}

// Casts between a half dtype and another non-float32 dtype go through
// float32 without a float32 copy of the whole tensor: the Go heap (which
// no budget sees) grows by far less than one.
func TestHalfCastNeedsNoWholeFloat32Copy(t *testing.T) {
	const n = 1 << 20 // a whole float32 copy: 4 MiB
	c := tensor.NewCtx()
	c.WithScope(func() {
		rng := rand.New(rand.NewPCG(9, 9))
		x := c.RandN(cpu, tensor.Float64, rng, 1, n)
		h := x.To(tensor.Float16)
		for _, tc := range []struct {
			src *tensor.Tensor
			dt  tensor.DType
		}{{x, tensor.BFloat16}, {h, tensor.BFloat16}, {h, tensor.Float64}, {h, tensor.Int32}, {x.To(tensor.Int32), tensor.Float16}} {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap := ms.TotalAlloc
			y := tc.src.To(tc.dt)
			runtime.ReadMemStats(&ms)
			y.Release()
			assert.Less(t, ms.TotalAlloc-heap, uint64(1<<20), "%v to %v: Go heap bytes allocated", tc.src.DType(), tc.dt)
		}
	})
}

// The casts through float32 in chunks give the bits of the plain
// two-step conversion, at sizes around the chunk and parallel bounds.
func TestHalfCastChunkedMatchesTwoStep(t *testing.T) {
	c := tensor.NewCtx()
	for _, n := range []int{1, 7, 4095, 4096, 4097, 1<<17 + 3, 3<<17 + 1} {
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(uint64(n), 2))
			x := c.RandN(cpu, tensor.Float64, rng, 1e3, n)
			for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
				other := tensor.BFloat16
				if dt == tensor.BFloat16 {
					other = tensor.Float16
				}
				h := x.To(dt)
				require.Equal(t, x.To(tensor.Float32).To(dt).Float64s(), h.Float64s(), "float64 to %v, n %d", dt, n)
				require.Equal(t, h.To(tensor.Float32).To(other).Float64s(), h.To(other).Float64s(), "%v to %v, n %d", dt, other, n)
				require.Equal(t, h.To(tensor.Float32).To(tensor.Float64).Float64s(), h.To(tensor.Float64).Float64s(), "%v to float64, n %d", dt, n)
				require.Equal(t, h.To(tensor.Float32).To(tensor.Int32).Float64s(), h.To(tensor.Int32).Float64s(), "%v to int32, n %d", dt, n)
				i := x.To(tensor.Int32)
				require.Equal(t, i.To(tensor.Float32).To(dt).Float64s(), i.To(dt).Float64s(), "int32 to %v, n %d", dt, n)
			}
		})
	}
}

// Every allocation of the half ops that widen to float32 may fail: the
// error is out of memory and the bytes in use are as before.
func TestOutOfMemoryHalfOpsReleaseWorkspace(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	mk := func(dt tensor.DType, shape ...int) *tensor.Tensor {
		x := tensor.RandN(cpu, tensor.Float32, rng, 1, shape...)
		defer x.Release()
		h := x.To(dt)
		tensor.Keep(h)
		return h
	}
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		a, b, c := mk(dt, 2, 5, 9), mk(dt, 9, 4), mk(dt, 5, 4)
		a2 := mk(dt, 5, 9)
		q, qkv := mk(dt, 2, 8, 4), mk(dt, 1, 8, 12)
		out, lse := tensor.FusedCausalAttention(q, q, q, 0, 0, 0)
		y, ylse := tensor.FusedCausalAttentionQKV(qkv, 2, 0, 0, 0)
		tensor.Keep(out, lse, y, ylse)
		ops := map[string]func(){
			"MatMul":           func() { releaseAll(tensor.MatMul(a, b)) },
			"MatMulFloat32Out": func() { releaseAll(tensor.MatMulWith(a, b, 2, tensor.MatMulMode{Float32Out: true})) },
			"MatMulInto":       func() { tensor.MatMulInto(c, a2, b, 1, tensor.MatMulMode{}) },
			"To":               func() { releaseAll(a.To(tensor.Float64)) },
			"Attention":        func() { releaseAll(tensor.FusedCausalAttention(q, q, q, 0, 0, 0)) },
			"AttentionBackward": func() {
				releaseAll(tensor.FusedCausalAttentionBackward(q, q, q, out, lse, out, 0, 0, 0))
			},
			"AttentionQKV": func() { releaseAll(tensor.FusedCausalAttentionQKV(qkv, 2, 0, 0, 0)) },
			"AttentionQKVBackward": func() {
				releaseAll(tensor.FusedCausalAttentionQKVBackward(qkv, y, ylse, y, 2, 0, 0, 0))
			},
		}
		mgr := cpu.Memory()
		for name, op := range ops {
			t.Run(fmt.Sprintf("%v/%s", dt, name), func(t *testing.T) {
				for n := int64(1); ; n++ {
					before := memtest.Settled(mgr)
					mgr.FailAllocation(n)
					err := tensor.Try(op)
					injected := mgr.FailAllocation(0)
					if injected == 0 { // the op made fewer than n allocations
						require.NoError(t, err)
						return
					}
					require.ErrorIs(t, err, memory.ErrOutOfMemory, "allocation %d", n)
					assert.Equal(t, before, mgr.InUse(), "%s: bytes in use after its allocation %d failed", name, n)
				}
			})
		}
		releaseAll(a, b, c, a2, q, qkv, out, lse, y, ylse)
	}
}

// BenchmarkCPUHalfMatMul times the CPU's float16 and bfloat16 GEMM
// (widening, float32 product, rounding back).
func BenchmarkCPUHalfMatMul(b *testing.B) {
	for _, sz := range [][3]int{{64, 768, 768}, {512, 512, 512}, {8 * 64, 64, 64}} {
		for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
			b.Run(fmt.Sprintf("%v/%dx%dx%d", dt, sz[0], sz[1], sz[2]), func(b *testing.B) {
				x, w := halfOn(b, cpu, dt, 1, sz[0], sz[1]), halfOn(b, cpu, dt, 2, sz[1], sz[2])
				defer releaseAll(x, w)
				b.ReportAllocs()
				for b.Loop() {
					tensor.MatMul(x, w).Release()
				}
			})
		}
	}
}

// BenchmarkCPUHalfCast times casts that go through float32.
func BenchmarkCPUHalfCast(b *testing.B) {
	for _, n := range []int{4096, 1 << 20} {
		h := halfOn(b, cpu, tensor.Float16, 3, n)
		b.Run(fmt.Sprintf("f16-bf16/%d", n), func(b *testing.B) {
			for b.Loop() {
				h.To(tensor.BFloat16).Release()
			}
		})
		b.Run(fmt.Sprintf("f16-f64/%d", n), func(b *testing.B) {
			for b.Loop() {
				h.To(tensor.Float64).Release()
			}
		})
		h.Release()
	}
}
