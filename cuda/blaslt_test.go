package cuda

import (
	"math/rand/v2"
	"os"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLtRowMajor is LtMatmul's contract on host slices (row-major, float64
// sums): C = alpha op(A) op(B) + beta C, then the epilogue on bias.
func refLtRowMajor(g *LtMatmul, a, b, c, bias []float32) {
	opA := func(i, l int) float64 {
		if g.TransA == OpN {
			return float64(a[i*g.LDA+l])
		}
		return float64(a[l*g.LDA+i])
	}
	opB := func(l, j int) float64 {
		if g.TransB == OpN {
			return float64(b[l*g.LDB+j])
		}
		return float64(b[j*g.LDB+l])
	}
	refGemmRowMajor(g.TransA, g.TransB, g.M, g.N, g.K, g.Alpha, a, g.LDA, b, g.LDB, g.Beta, c, g.LDC)
	switch g.Epilogue {
	case EpilogueBias:
		for i := range g.M {
			for j := range g.N {
				c[i*g.LDC+j] += bias[j]
			}
		}
	case EpilogueBiasGradA:
		for i := range g.M {
			var s float64
			for l := range g.K {
				s += opA(i, l)
			}
			bias[i] = float32(s)
		}
	case EpilogueBiasGradB:
		for j := range g.N {
			var s float64
			for l := range g.K {
				s += opB(l, j)
			}
			bias[j] = float32(s)
		}
	}
}

// refLtColMajor is cuBLASLt's contract for the converted call, as its
// header states it: column-major D = alpha op(A) op(B) + beta C, then
// EPILOGUE_BIAS adds a vector of D's rows (m) to every column, BGRADA
// writes the sums over k of op(A) (m), BGRADB those of op(B) (n).
func refLtColMajor(c *ltCall, a, b, d, bias []float32) {
	k := &c.key
	refGemmColMajor(k.transA, k.transB, k.m, k.n, k.k, c.alpha, a, k.lda, b, k.ldb, c.beta, d, k.ldc)
	opA := func(i, l int) float32 {
		if k.transA == OpN {
			return a[i+l*k.lda]
		}
		return a[l+i*k.lda]
	}
	opB := func(l, j int) float32 {
		if k.transB == OpN {
			return b[l+j*k.ldb]
		}
		return b[j+l*k.ldb]
	}
	switch k.epilogue {
	case ltEpilogueBias:
		for j := range k.n {
			for i := range k.m {
				d[i+j*k.ldc] += bias[i]
			}
		}
	case ltEpilogueBGradA:
		for i := range k.m {
			var s float64
			for l := range k.k {
				s += float64(opA(i, l))
			}
			bias[i] = float32(s)
		}
	case ltEpilogueBGradB:
		for j := range k.n {
			var s float64
			for l := range k.k {
				s += float64(opB(l, j))
			}
			bias[j] = float32(s)
		}
	}
}

var allEpilogues = []Epilogue{EpilogueNone, EpilogueBias, EpilogueBiasGradA, EpilogueBiasGradB}

// The row-major to column-major conversion, epilogues and bias lengths
// included, checked by running the converted call through cuBLASLt's
// column-major contract on the same bytes.
func TestLtRowMajorConversion(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 5, 7, 3
	for _, ep := range allEpilogues {
		for _, ta := range []Op{OpN, OpT} {
			for _, tb := range []Op{OpN, OpT} {
				ar, ac := storedShape(ta, m, k)
				br, bc := storedShape(tb, k, n)
				g := LtMatmul{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 0.5, Beta: 2,
					A: 256, LDA: ac + 2, B: 512, LDB: bc + 1, C: 768, LDC: n + 3, Compute: Compute32F, Epilogue: ep}
				if ep != EpilogueNone {
					g.Bias = 1024
				}
				require.NoError(t, g.validate())
				a, b := randFloats(r, ar*g.LDA), randFloats(r, br*g.LDB)
				c0, bias0 := randFloats(r, m*g.LDC), randFloats(r, max(m, n))
				want, wantBias := append([]float32(nil), c0...), append([]float32(nil), bias0...)
				refLtRowMajor(&g, a, b, want, wantBias)

				cl := g.columnMajor()
				assert.Equal(t, ep.biasLen(m, n), cl.biasLen, "%s", ep)
				operand := map[DevicePtr][]float32{256: a, 512: b}
				got, gotBias := append([]float32(nil), c0...), append([]float32(nil), bias0...)
				refLtColMajor(&cl, operand[cl.a], operand[cl.b], got, gotBias)
				for i := range want {
					assert.InDelta(t, want[i], got[i], 1e-5, "%s %s%s element %d", ep, ta, tb, i)
				}
				for i := range wantBias {
					assert.InDelta(t, wantBias[i], gotBias[i], 1e-5, "%s %s%s bias %d", ep, ta, tb, i)
				}
			}
		}
	}
}

func TestLtEpilogueMapping(t *testing.T) {
	assert.Equal(t, uint32(1), EpilogueNone.columnMajor())
	assert.Equal(t, uint32(4), EpilogueBias.columnMajor())
	assert.Equal(t, uint32(512), EpilogueBiasGradA.columnMajor(), "op(A) is cuBLASLt's B")
	assert.Equal(t, uint32(256), EpilogueBiasGradB.columnMajor(), "op(B) is cuBLASLt's A")
	assert.Equal(t, []int{0, 7, 5, 7}, []int{EpilogueNone.biasLen(5, 7), EpilogueBias.biasLen(5, 7),
		EpilogueBiasGradA.biasLen(5, 7), EpilogueBiasGradB.biasLen(5, 7)})
	assert.Equal(t, "bias-grad-A", EpilogueBiasGradA.String())
	assert.Equal(t, "Epilogue(9)", Epilogue(9).String())
	g := LtMatmul{TransA: OpC, TransB: OpN, M: 2, N: 3, K: 4, A: 1, B: 2, C: 3, LDA: 2, LDB: 3, LDC: 3}
	cl := g.columnMajor()
	assert.Equal(t, []any{OpN, OpT, 3, 2, DevicePtr(2), DevicePtr(1), 3, 2}, []any{cl.key.transA, cl.key.transB,
		cl.key.m, cl.key.n, cl.a, cl.b, cl.key.lda, cl.key.ldb}, "OpC is OpT for real types")
}

// cublasLtMatmulHeuristicResult_t: algo (64 bytes), size_t workspaceSize,
// cublasStatus_t state, float wavesCount, int reserved[4].
func TestLtHeuristicResultLayout(t *testing.T) {
	var h ltHeuristicResult
	assert.Equal(t, uintptr(96), ltHeuristicResultSize)
	assert.Equal(t, []uintptr{0, 64, 72, 76, 80}, []uintptr{unsafe.Offsetof(h.algo), unsafe.Offsetof(h.workspaceSize),
		unsafe.Offsetof(h.state), unsafe.Offsetof(h.wavesCount), unsafe.Offsetof(h.reserved)})
	assert.Equal(t, uintptr(8), unsafe.Alignof(h))
}

func TestLtValidation(t *testing.T) {
	base := LtMatmul{M: 4, N: 5, K: 6, A: 1, LDA: 6, B: 2, LDB: 5, C: 3, LDC: 5, TypeA: TypeBF16, TypeB: TypeBF16,
		TypeC: TypeF32, Compute: Compute32F, Epilogue: EpilogueBias, Bias: 4}
	require.NoError(t, base.validate())
	cases := []struct {
		edit func(*LtMatmul)
		want string
	}{
		{func(g *LtMatmul) { g.LDA = 5 }, "BLASLt.Matmul: lda = 5 is less than 6: a is stored 4x6 row-major (op N)"},
		{func(g *LtMatmul) { g.TransB = OpT }, "ldb = 5 is less than 6: b is stored 5x6 row-major (op T)"},
		{func(g *LtMatmul) { g.LDC = 4 }, "ldc = 4 is less than 5"},
		{func(g *LtMatmul) { g.M = -1 }, "m = -1 is outside"},
		{func(g *LtMatmul) { g.TransA = Op(9) }, "unknown operation 9"},
		{func(g *LtMatmul) { g.C = 0 }, "nil C for a 4x5 result"},
		{func(g *LtMatmul) { g.B = 0 }, "nil A or B with k = 6"},
		{func(g *LtMatmul) { g.TypeB = TypeF16 }, "A is bf16 but B is f16"},
		{func(g *LtMatmul) { g.TypeC = TypeF16 }, "C is f16 for bf16 inputs"},
		{func(g *LtMatmul) { g.Compute = ComputeType(64) }, "only the float32 compute types"},
		{func(g *LtMatmul) { g.Epilogue = Epilogue(7) }, "unknown epilogue 7"},
		{func(g *LtMatmul) { g.Bias = 0 }, "epilogue bias needs a bias vector of 5 elements: Bias is nil"},
		{func(g *LtMatmul) { g.Epilogue, g.Bias = EpilogueBiasGradA, 0 }, "epilogue bias-grad-A needs a bias vector of 4 elements"},
		{func(g *LtMatmul) { g.Epilogue = EpilogueNone }, "Bias 0x4 given without an epilogue that uses it"},
		{func(g *LtMatmul) { g.TypeBias = TypeBF16 }, "bias is bf16 for a f32 C: use f32 or f32"},
	}
	for _, tc := range cases {
		g := base
		tc.edit(&g)
		err := g.validate()
		assert.ErrorIs(t, err, ErrInvalidValue, tc.want)
		assert.ErrorContains(t, err, tc.want)
	}
	g := base
	g.TypeA, g.TypeB, g.TypeC, g.TypeBias = TypeBF16, TypeBF16, TypeBF16, TypeBF16
	assert.NoError(t, g.validate(), "a bias of C's type")
	g.TypeBias = TypeF32
	assert.NoError(t, g.validate(), "an f32 bias for a bf16 C")
	g = base
	g.M, g.A, g.B, g.C, g.Bias = 0, 0, 0, 0, 0
	assert.NoError(t, g.validate(), "an empty product needs no pointers")
}

// Matmul's answers that need no library: invalid arguments, the empty
// cases (nothing to do, or ErrNotSupported where a bias gradient of an
// empty product or reduction would be left to cuBLASLt).
func TestLtEmptyProblems(t *testing.T) {
	b := &BLASLt{}
	g := LtMatmul{M: 4, N: 0, K: 6, A: 1, LDA: 6, B: 2, LDB: 1, C: 3, LDC: 1, Compute: Compute32F}
	assert.NoError(t, b.Matmul(g))
	g.Epilogue, g.Bias = EpilogueBias, 4
	assert.NoError(t, b.Matmul(g))
	g.Epilogue = EpilogueBiasGradA
	assert.ErrorIs(t, b.Matmul(g), ErrNotSupported)
	g = LtMatmul{M: 4, N: 5, K: 0, A: 1, LDA: 1, B: 2, LDB: 5, C: 3, LDC: 5, Compute: Compute32F}
	err := b.Matmul(g)
	assert.ErrorIs(t, err, ErrNotSupported)
	assert.ErrorContains(t, err, "M=4 N=5 K=0 with epilogue none")
	g.LDC = 1
	assert.ErrorIs(t, b.Matmul(g), ErrInvalidValue)
}

// The plan cache's key: everything but the pointers (their alignment
// only) and alpha and beta.
func TestLtPlanKey(t *testing.T) {
	base := LtMatmul{TransA: OpN, TransB: OpT, M: 64, N: 2304, K: 768, Alpha: 1, A: 0x1000, LDA: 768, B: 0x200000,
		LDB: 768, C: 0x800000, LDC: 2304, TypeA: TypeBF16, TypeB: TypeBF16, TypeC: TypeF32, Compute: Compute32F,
		Epilogue: EpilogueBias, Bias: 0x900000}
	key := base.columnMajor().key
	same := base
	same.A, same.B, same.C, same.Bias = 0x7000, 0x300000, 0xa00000, 0xb00000
	same.Alpha, same.Beta = 0.25, 1
	assert.Equal(t, key, same.columnMajor().key)
	assert.Equal(t, uint32(256), key.alignA)

	for name, edit := range map[string]func(*LtMatmul){
		"transA":    func(g *LtMatmul) { g.TransA, g.LDA = OpT, 64 },
		"transB":    func(g *LtMatmul) { g.TransB, g.LDB = OpN, 2304 },
		"M":         func(g *LtMatmul) { g.M = 63 },
		"N":         func(g *LtMatmul) { g.N = 2303 },
		"K":         func(g *LtMatmul) { g.K = 767 },
		"LDA":       func(g *LtMatmul) { g.LDA = 769 },
		"LDB":       func(g *LtMatmul) { g.LDB = 800 },
		"LDC":       func(g *LtMatmul) { g.LDC = 2400 },
		"types":     func(g *LtMatmul) { g.TypeA, g.TypeB = TypeF16, TypeF16 },
		"TypeC":     func(g *LtMatmul) { g.TypeC = TypeBF16 },
		"compute":   func(g *LtMatmul) { g.Compute = Compute32FFastTF32 },
		"epilogue":  func(g *LtMatmul) { g.Epilogue = EpilogueBiasGradB },
		"no bias":   func(g *LtMatmul) { g.Epilogue, g.Bias = EpilogueNone, 0 },
		"TypeBias":  func(g *LtMatmul) { g.TypeBias = TypeBF16 },
		"A aligned": func(g *LtMatmul) { g.A += 2 },
		"B aligned": func(g *LtMatmul) { g.B += 16 },
		"C aligned": func(g *LtMatmul) { g.C += 4 },
		"bias":      func(g *LtMatmul) { g.Bias += 4 },
	} {
		g := base
		edit(&g)
		assert.NotEqual(t, key, g.columnMajor().key, name)
	}
	assert.Equal(t, []uint32{256, 2, 16, 256, 256}, []uint32{ptrAlign(0), ptrAlign(0x1002), ptrAlign(0x30), ptrAlign(0x300), ptrAlign(0x100)})
}

// Validation and conversion, the steady-state path before the C calls,
// allocate nothing.
func TestLtValidationDoesNotAllocate(t *testing.T) {
	g := LtMatmul{TransA: OpT, M: 64, N: 48, K: 96, Alpha: 1, A: 0x1000, LDA: 64, B: 0x2000, LDB: 48, C: 0x3000,
		LDC: 48, TypeA: TypeBF16, TypeB: TypeBF16, TypeC: TypeF32, Compute: Compute32F, Epilogue: EpilogueBiasGradA, Bias: 0x4000}
	var sink ltCall
	allocs := testing.AllocsPerRun(200, func() {
		if err := g.validate(); err != nil {
			panic(err)
		}
		sink = g.columnMajor()
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 64, sink.biasLen)
}

func TestLtDiscovery(t *testing.T) {
	t.Setenv("CUDA_HOME", "/opt/cuda-test")
	s := cublasLtSpec()
	assert.Equal(t, []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, s.Names)
	assert.Equal(t, cublasSpec().Dirs, s.Dirs, "found where libcublas is")
	assert.Equal(t, "/opt/cuda-test/lib64", s.Dirs[0])
	assert.Equal(t, EnvCUBLASLtLib, s.Env)
	assert.Contains(t, s.Fix, "STRATA_CUBLASLT_LIB")
	assert.Equal(t, ErrNoCUBLASLt, s.Kind)

	if !platformSupported {
		t.Skip("linux only")
	}
	_, err := loadBLASLt(env(map[string]string{EnvCUBLASLtLib: "/nonexistent/libcublasLt.so.13"}))
	require.ErrorIs(t, err, ErrNoCUBLASLt)
	assert.NotErrorIs(t, err, ErrNoCUBLAS)
	assert.Contains(t, err.Error(), "cannot load cuBLASLt (libcublasLt) from STRATA_CUBLASLT_LIB=/nonexistent/libcublasLt.so.13")
	assert.Contains(t, err.Error(), "point STRATA_CUBLASLT_LIB at the library file, or unset it")

	// A file in a searched folder that is no library: every candidate is
	// reported, then how to fix it.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(dir+"/libcublasLt-absent.so.13", []byte("not an ELF file"), 0o644))
	s.Names = []string{"libcublasLt-absent.so.13"}
	s.Dirs = []string{dir}
	_, _, err = openLibrary(s, env(nil))
	require.ErrorIs(t, err, ErrNoCUBLASLt)
	assert.Contains(t, err.Error(), "cuda: cannot load cuBLASLt (libcublasLt): tried libcublasLt-absent.so.13 (")
	assert.Contains(t, err.Error(), "; "+dir+"/libcublasLt-absent.so.13 (")
	assert.Contains(t, err.Error(), "set STRATA_CUBLASLT_LIB to the full path of libcublasLt.so.13")

	libcSym(t, "labs") // skips without libc
	_, err = loadBLASLt(env(map[string]string{EnvCUBLASLtLib: "libc.so.6"}))
	require.ErrorIs(t, err, ErrNoCUBLASLt)
	assert.Contains(t, err.Error(), "libc.so.6 lacks cublasLtCreate, cublasLtDestroy")
	assert.Contains(t, err.Error(), "it is not cuBLASLt 12 or 13")
}

// Where a libcublasLt is installed (a GPU is not needed), the attribute
// ids and sizes used here are the library's: cublasLt*SetAttribute checks
// each size against the attribute's and answers CUBLAS_STATUS_INVALID_VALUE
// on a mismatch, as the last check shows.
func TestLtDescriptorsOnHost(t *testing.T) {
	lib, err := loadBLASLt(os.Getenv)
	if err != nil {
		t.Skipf("no libcublasLt here: %v", err)
	}
	f := getFrame()
	defer f.release()
	t.Logf("cuBLASLt %d from %s", f.call(lib.getVersion.addr), lib.path)
	call := func(sym symbol, args ...uintptr) uint32 { return uint32(f.call(sym.addr, args...)) }
	if st := call(lib.descCreate, f.outAddr(0), uintptr(Compute32F), uintptr(TypeF32)); st != 0 {
		t.Skipf("cublasLtMatmulDescCreate needs more than the host here: status %d", st)
	}
	desc := uintptr(f.out[0])
	set := func(sym symbol, obj uintptr, attr int, v uint64, size int) uint32 {
		f.out[3] = v
		return call(sym, obj, uintptr(attr), f.outAddr(3), uintptr(size))
	}
	for _, a := range []ltAttr{{ltDescTransA, 1, 4}, {ltDescTransB, 0, 4}, {ltDescEpilogue, ltEpilogueBias, 4},
		{ltDescEpilogue, ltEpilogueBGradA, 4}, {ltDescEpilogue, ltEpilogueBGradB, 4},
		{ltDescBiasDataType, uint64(TypeBF16), 4}, {ltDescBiasPointer, 0x1000, 8}} {
		assert.Zero(t, set(lib.descSetAttr, desc, a.attr, a.v, a.size), "desc attribute %d (%d bytes)", a.attr, a.size)
	}
	assert.Equal(t, uint32(cublasStatusInvalidValue), set(lib.descSetAttr, desc, ltDescTransA, 1, 8), "a wrong size is refused")
	assert.Zero(t, call(lib.descDestroy, desc))

	require.Zero(t, call(lib.prefCreate, f.outAddr(0)))
	pref := uintptr(f.out[0])
	for _, a := range []ltAttr{{ltPrefMaxWorkspaceBytes, 32 << 20, 8}, {ltPrefMinAlignmentA, 16, 4},
		{ltPrefMinAlignmentB, 256, 4}, {ltPrefMinAlignmentC, 4, 4}, {ltPrefMinAlignmentD, 4, 4}} {
		assert.Zero(t, set(lib.prefSetAttr, pref, a.attr, a.v, a.size), "preference attribute %d", a.attr)
	}
	assert.Equal(t, uint32(cublasStatusInvalidValue), set(lib.prefSetAttr, pref, ltPrefMaxWorkspaceBytes, 1, 4))
	assert.Zero(t, call(lib.prefDestroy, pref))

	require.Zero(t, call(lib.layoutCreate, f.outAddr(0), uintptr(TypeBF16), 768, 64, 768))
	assert.Zero(t, call(lib.layoutDestroy, uintptr(f.out[0])))
	if lib.getStatusName != 0 {
		assert.Equal(t, "CUBLAS_STATUS_NOT_SUPPORTED", newLtError(lib, "cublasLtMatmul", cublasStatusNotSupported, "").Name)
	}
	assert.ErrorIs(t, newLtError(lib, "cublasLtMatmul", cublasStatusNotSupported, ""), ErrNotSupported)
}
