package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/x448/float16"
)

func newBLAS(t *testing.T, c *Context) *BLAS {
	t.Helper()
	b, err := c.NewBLAS()
	if errors.Is(err, ErrNoCUBLAS) {
		t.Skipf("cuBLAS not available: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Destroy() })
	return b
}

// assertClose compares with a tolerance relative to the largest |want|.
func assertClose(t *testing.T, want, got []float32, rel float64, msg string) {
	t.Helper()
	require.Len(t, got, len(want))
	scale := 1e-6
	for _, w := range want {
		scale = math.Max(scale, math.Abs(float64(w)))
	}
	worst, at := 0.0, 0
	for i := range want {
		if d := math.Abs(float64(want[i]) - float64(got[i])); d > worst {
			worst, at = d, i
		}
	}
	assert.LessOrEqual(t, worst/scale, rel, "%s: worst error %g at %d (want %g, got %g)", msg, worst, at, want[at], got[at])
}

// The float32 GEMM in every transpose combination, with padded rows and
// gaps between the matrices of a batch, against a float64 reference.
func TestGPUSgemm(t *testing.T) {
	c := gpuContext(t)
	bl := newBLAS(t, c)
	t.Logf("cuBLAS %d from %s", bl.Version(), bl.LibraryPath())
	require.NoError(t, bl.SetMathMode(MathPedantic))
	r := rand.New(rand.NewPCG(5, 6))
	const m, n, k = 67, 45, 129
	for _, batch := range []int{1, 3} {
		for _, ta := range []Op{OpN, OpT} {
			for _, tb := range []Op{OpN, OpT} {
				ar, ac := m, k
				if ta != OpN {
					ar, ac = k, m
				}
				br, bc := k, n
				if tb != OpN {
					br, bc = n, k
				}
				lda, ldb, ldc := ac+3, bc+1, n+2
				sA, sB, sC := ar*lda+5, br*ldb+7, m*ldc+1 // gaps between matrices
				av, bv := randFloats(r, batch*sA), randFloats(r, batch*sB)
				cv := randFloats(r, batch*sC)
				want := append([]float32(nil), cv...)
				for i := range batch {
					refGemmRowMajor(ta, tb, m, n, k, 1.5, av[i*sA:], lda, bv[i*sB:], ldb, -0.5, want[i*sC:], ldc)
				}
				a, b, cm := deviceFloats(t, c, av), deviceFloats(t, c, bv), deviceFloats(t, c, cv)
				require.NoError(t, bl.SgemmStridedBatchedRowMajor(ta, tb, m, n, k, 1.5, a, lda, int64(sA), b, ldb, int64(sB),
					-0.5, cm, ldc, int64(sC), batch))
				assertClose(t, want, readFloats(t, c, cm, len(cv)), 1e-5, fmt.Sprintf("sgemm %s%s batch %d", ta, tb, batch))
			}
		}
	}
	err := bl.SgemmStridedBatchedRowMajor(OpN, OpN, 4, 4, 4, 1, 1, 2, 0, 1, 4, 0, 0, 1, 4, 0, 1)
	assert.ErrorContains(t, err, "lda = 2 is less than 4")
}

// Dense batches, as MatMul makes them, and a B shared by every product
// (stride 0), as a batched input times one weight.
func TestGPUSgemmStridedBatched(t *testing.T) {
	c := gpuContext(t)
	bl := newBLAS(t, c)
	r := rand.New(rand.NewPCG(8, 9))
	const m, n, k, batch = 32, 24, 40, 3
	av, bv := randFloats(r, batch*m*k), randFloats(r, batch*k*n)
	cv := make([]float32, batch*m*n)
	want := make([]float32, len(cv))
	for i := range batch {
		refGemmRowMajor(OpN, OpN, m, n, k, 1, av[i*m*k:], k, bv[i*k*n:], n, 0, want[i*m*n:], n)
	}
	a, b, cm := deviceFloats(t, c, av), deviceFloats(t, c, bv), deviceFloats(t, c, cv)
	require.NoError(t, bl.SgemmStridedBatchedRowMajor(OpN, OpN, m, n, k, 1, a, k, m*k, b, n, k*n, 0, cm, n, m*n, batch))
	assertClose(t, want, readFloats(t, c, cm, len(cv)), 1e-5, "batched row-major")

	// B^T shared: B is stored n x k once.
	for i := range batch {
		refGemmRowMajor(OpN, OpT, m, n, k, 1, av[i*m*k:], k, bv, k, 0, want[i*m*n:], n)
	}
	require.NoError(t, c.MemsetD8(cm, 0, len(cv)*4))
	require.NoError(t, bl.SgemmStridedBatchedRowMajor(OpN, OpT, m, n, k, 1, a, k, m*k, b, k, 0, 0, cm, n, m*n, batch))
	assertClose(t, want, readFloats(t, c, cm, len(cv)), 1e-5, "batched with a shared B")
}

func toBF16(f float32) uint16 {
	b := math.Float32bits(f)
	b += 0x7FFF + (b>>16)&1 // round to nearest even
	return uint16(b >> 16)
}

func fromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// halfInputs rounds v to the given 16-bit type, returning the bits and
// the rounded values as float32 for the reference.
func halfInputs(v []float32, typ DataType) ([]uint16, []float32) {
	bits := make([]uint16, len(v))
	back := make([]float32, len(v))
	for i, f := range v {
		if typ == TypeF16 {
			h := float16.Fromfloat32(f)
			bits[i], back[i] = h.Bits(), h.Float32()
		} else {
			bits[i] = toBF16(f)
			back[i] = fromBF16(bits[i])
		}
	}
	return bits, back
}

func deviceU16(t *testing.T, c *Context, v []uint16) DevicePtr {
	p, err := c.MemAlloc(len(v) * 2)
	require.NoError(t, err)
	require.NoError(t, c.MemcpyHtoD(p, u16Bytes(v)))
	require.NoError(t, c.Synchronize()) // see deviceFloats
	t.Cleanup(func() { _ = c.MemFree(p) })
	return p
}

func TestGPUGemmExHalfPrecision(t *testing.T) {
	c := gpuContext(t)
	bl := newBLAS(t, c)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	ws, err := c.MemAlloc(32 << 20)
	require.NoError(t, err)
	defer c.MemFree(ws)
	require.NoError(t, bl.SetWorkspace(ws, 32<<20))
	require.NoError(t, bl.SetStream(s))
	assert.Same(t, s, bl.Stream())

	r := rand.New(rand.NewPCG(10, 11))
	const m, n, k = 64, 48, 96
	for _, typ := range []DataType{TypeF16, TypeBF16} {
		abits, aval := halfInputs(randFloats(r, m*k), typ)
		bbits, bval := halfInputs(randFloats(r, k*n), typ)
		want := make([]float32, m*n)
		refGemmRowMajor(OpN, OpT, m, n, k, 1, aval, k, bval, k, 0, want, n) // B stored n x k
		a, b := deviceU16(t, c, abits), deviceU16(t, c, bbits)

		// float32 output: only accumulation-order differences remain.
		out32 := deviceFloats(t, c, make([]float32, m*n))
		require.NoError(t, bl.GemmStridedBatchedExRowMajor(OpN, OpT, m, n, k, 1, a, typ, k, 0, b, typ, k, 0,
			0, out32, TypeF32, n, 0, 1, Compute32F))
		require.NoError(t, s.Synchronize())
		assertClose(t, want, readFloats(t, c, out32, m*n), 1e-4, typ.String()+" in, f32 out")

		// 16-bit output, batched over two copies: rounding of the result.
		const batch = 2
		ab2, bb2 := append(append([]uint16{}, abits...), abits...), append(append([]uint16{}, bbits...), bbits...)
		a2, b2 := deviceU16(t, c, ab2), deviceU16(t, c, bb2)
		out16 := deviceU16(t, c, make([]uint16, batch*m*n))
		require.NoError(t, bl.GemmStridedBatchedExRowMajor(OpN, OpT, m, n, k, 1, a2, typ, k, m*k, b2, typ, k, n*k,
			0, out16, typ, n, m*n, batch, Compute32F))
		require.NoError(t, s.Synchronize())
		raw := make([]uint16, batch*m*n)
		require.NoError(t, c.MemcpyDtoH(u16Bytes(raw), out16))
		got := make([]float32, len(raw))
		for i, h := range raw {
			if typ == TypeF16 {
				got[i] = float16.Frombits(h).Float32()
			} else {
				got[i] = fromBF16(h)
			}
		}
		tol := 2e-3 // half: 11-bit mantissa
		if typ == TypeBF16 {
			tol = 1e-2 // bfloat16: 8-bit mantissa
		}
		assertClose(t, append(append([]float32{}, want...), want...), got, tol, typ.String()+" in and out, batched")
	}

	// The type checks happen before cuBLAS is called.
	a := deviceU16(t, c, make([]uint16, 64))
	out := deviceFloats(t, c, make([]float32, 64))
	err = bl.GemmStridedBatchedExRowMajor(OpN, OpN, 8, 8, 8, 1, a, TypeF16, 8, 0, a, TypeBF16, 8, 0, 0, out, TypeF32, 8, 0, 1, Compute32F)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "GemmStridedBatchedExRowMajor: A is f16 but B is bf16")

	require.NoError(t, bl.SetStream(nil))
	require.NoError(t, bl.SetWorkspace(0, 0))
	assert.ErrorIs(t, bl.SetWorkspace(ws.Add(16), 1024), ErrInvalidValue, "unaligned workspace")
	require.NoError(t, bl.Destroy())
	assert.ErrorContains(t, bl.SgemmStridedBatchedRowMajor(OpN, OpN, 1, 1, 1, 1, ws, 1, 0, ws, 1, 0, 0, ws, 1, 0, 1), "destroyed")
}
