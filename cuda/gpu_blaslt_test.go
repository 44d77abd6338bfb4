package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newBLASLt(t *testing.T, c *Context) *BLASLt {
	t.Helper()
	b, err := c.NewBLASLt()
	if errors.Is(err, ErrNoCUBLASLt) {
		t.Skipf("cuBLASLt not available: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Destroy() })
	t.Logf("cuBLASLt %d from %s", b.Version(), b.LibraryPath())
	return b
}

// Every epilogue, in every transpose combination, with f32 and bf16
// inputs and an f32 C accumulated in place (beta 0.5), against a float64
// reference on the rounded inputs. A bias gradient in a combination
// cuBLASLt has no algorithm for must answer ErrNotSupported; those whose
// operand is stored K rows long (op(A) = Aᵀ, op(B) = B: the reduction runs
// down the stored columns) must run. cuBLASLt 13.1 on the H200 runs
// exactly those, and every bias and plain product.
func TestGPULtMatmulEpilogues(t *testing.T) {
	c := gpuContext(t)
	bl := newBLASLt(t, c)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	const wsSize = 32 << 20
	ws, err := c.MemAlloc(wsSize)
	require.NoError(t, err)
	defer c.MemFree(ws)
	require.NoError(t, bl.SetWorkspace(ws, wsSize))
	require.NoError(t, bl.SetStream(s))

	r := rand.New(rand.NewPCG(12, 13))
	var unsupported []string
	for _, shape := range [][3]int{{37, 48, 64}, {64, 2304, 768}} {
		m, n, k := shape[0], shape[1], shape[2]
		for _, typ := range []DataType{TypeF32, TypeBF16} {
			for _, ta := range []Op{OpN, OpT} {
				for _, tb := range []Op{OpN, OpT} {
					ar, ac := storedShape(ta, m, k)
					br, bc := storedShape(tb, k, n)
					av, bv := randFloats(r, ar*ac), randFloats(r, br*bc)
					var a, b DevicePtr
					if typ == TypeF32 {
						a, b = deviceFloats(t, c, av), deviceFloats(t, c, bv)
					} else {
						var abits, bbits []uint16
						abits, av = halfInputs(av, typ)
						bbits, bv = halfInputs(bv, typ)
						a, b = deviceU16(t, c, abits), deviceU16(t, c, bbits)
					}
					for _, ep := range allEpilogues {
						name := fmt.Sprintf("%dx%dx%d %s %s%s %s", m, n, k, typ, ta, tb, ep)
						g := LtMatmul{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 0.75, Beta: 0.5,
							A: a, TypeA: typ, LDA: ac, B: b, TypeB: typ, LDB: bc, TypeC: TypeF32, LDC: n,
							Compute: Compute32F, Epilogue: ep}
						cv := randFloats(r, m*n)
						biasv := randFloats(r, max(m, n))
						want, wantBias := append([]float32(nil), cv...), append([]float32(nil), biasv...)
						refLtRowMajor(&g, av, bv, want, wantBias)
						g.C = deviceFloats(t, c, cv)
						if ep != EpilogueNone {
							g.Bias = deviceFloats(t, c, biasv)
						}
						err := bl.Matmul(g)
						if errors.Is(err, ErrNotSupported) && (ep == EpilogueBiasGradA || ep == EpilogueBiasGradB) {
							unsupported = append(unsupported, name)
							continue
						}
						require.NoError(t, err, name)
						require.NoError(t, s.Synchronize())
						tol := 1e-5
						if typ == TypeBF16 {
							tol = 1e-4 // rounded inputs, f32 sums: only the order differs
						}
						assertClose(t, want, readFloats(t, c, g.C, m*n), tol, name)
						if ep != EpilogueNone {
							nb := ep.biasLen(m, n)
							assertClose(t, wantBias[:nb], readFloats(t, c, g.Bias, nb), tol, name+" bias")
						}
					}
				}
			}
		}
	}
	t.Logf("%d plans; bias gradients without an algorithm: %v", bl.Plans(), unsupported)
	for _, u := range unsupported {
		f := strings.Fields(u) // shape, type, ops, epilogue
		assert.False(t, f[3] == "bias-grad-A" && f[2][0] == 'T', "%s: a bias gradient of op(A) = Aᵀ (dW = dYᵀ X) must run", u)
		assert.False(t, f[3] == "bias-grad-B" && f[2][1] == 'N', "%s: a bias gradient of op(B) = B must run", u)
	}
}

// The steady state: a planned problem runs with no Go allocation, in two
// driver calls (cuCtxSetCurrent, cublasLtMatmul) and two more for the
// bias pointer, and the same problem with other pointers and scalars
// reuses its plan.
func TestGPULtMatmulSteadyState(t *testing.T) {
	c := gpuContext(t)
	bl := newBLASLt(t, c)
	const m, n, k = 64, 96, 128
	r := rand.New(rand.NewPCG(14, 15))
	a, b := deviceFloats(t, c, randFloats(r, m*k)), deviceFloats(t, c, randFloats(r, n*k))
	out := deviceFloats(t, c, make([]float32, 2*m*n))
	bias := deviceFloats(t, c, randFloats(r, 2*n))
	g := LtMatmul{TransB: OpT, M: m, N: n, K: k, Alpha: 1, A: a, LDA: k, B: b, LDB: k, C: out, LDC: n,
		Compute: Compute32F, Epilogue: EpilogueBias, Bias: bias}
	require.NoError(t, bl.Matmul(g))
	require.Equal(t, 1, bl.Plans())
	g.C, g.Bias, g.Alpha, g.Beta = out.Add(m*n*4), bias.Add(n*4), 0.5, 1 // the bias now 128-byte aligned: a second plan
	require.NoError(t, bl.Matmul(g))
	require.Equal(t, 2, bl.Plans(), "C moved by 256-byte multiples, the bias by 384 bytes")
	plans := bl.Plans()
	allocs := testing.AllocsPerRun(100, func() {
		if err := bl.Matmul(g); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, plans, bl.Plans(), "no new plan for a planned problem")
	before := DriverCalls()
	require.NoError(t, bl.Matmul(g))
	assert.Equal(t, uint64(4), DriverCalls()-before, "bias pointer and product, each after cuCtxSetCurrent")
	g.Epilogue, g.Bias = EpilogueNone, 0
	require.NoError(t, bl.Matmul(g))
	before = DriverCalls()
	require.NoError(t, bl.Matmul(g))
	assert.Equal(t, uint64(2), DriverCalls()-before)
	require.NoError(t, c.Synchronize())
}

// A problem cuBLASLt has no algorithm for (f64 inputs with a float32
// compute type, which validation would refuse, so run is called
// directly) answers ErrNotSupported, is remembered, and leaves the handle
// working.
func TestGPULtMatmulNotSupported(t *testing.T) {
	c := gpuContext(t)
	bl := newBLASLt(t, c)
	p := deviceFloats(t, c, make([]float32, 4096))
	g := LtMatmul{M: 16, N: 16, K: 16, Alpha: 1, A: p, TypeA: TypeF64, LDA: 16, B: p, TypeB: TypeF64, LDB: 16,
		C: p, TypeC: TypeF64, LDC: 16, Compute: Compute32F}
	err := bl.run(&g)
	t.Logf("f64 with Compute32F: %v", err)
	require.ErrorIs(t, err, ErrNotSupported)
	plans := bl.Plans()
	assert.Equal(t, err, bl.run(&g), "the answer is remembered")
	assert.Equal(t, plans, bl.Plans())

	g.TypeA, g.TypeB, g.TypeC = TypeF32, TypeF32, TypeF32
	require.NoError(t, bl.Matmul(g), "the handle still works")
	require.NoError(t, c.Synchronize())

	g.K = 0
	assert.ErrorIs(t, bl.Matmul(g), ErrNotSupported)
	require.NoError(t, bl.Destroy())
	g.K = 16
	assert.ErrorContains(t, bl.Matmul(g), "destroyed")
	assert.NoError(t, bl.Destroy(), "twice is a no-op")
}
