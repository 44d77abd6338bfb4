package cuda

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refGemmColMajor is cuBLAS's sgemm contract on host slices: C = alpha
// op(A) op(B) + beta C, column-major, with leading dimensions.
func refGemmColMajor(ta, tb Op, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	at := func(i, l int) float64 { // op(A)[i, l]
		if ta == OpN {
			return float64(a[i+l*lda])
		}
		return float64(a[l+i*lda])
	}
	bt := func(l, j int) float64 { // op(B)[l, j]
		if tb == OpN {
			return float64(b[l+j*ldb])
		}
		return float64(b[j+l*ldb])
	}
	for j := range n {
		for i := range m {
			var s float64
			for l := range k {
				s += at(i, l) * bt(l, j)
			}
			c[i+j*ldc] = float32(float64(alpha)*s + float64(beta)*float64(c[i+j*ldc]))
		}
	}
}

// refGemmRowMajor is the same product with row-major storage.
func refGemmRowMajor(ta, tb Op, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	at := func(i, l int) float64 {
		if ta == OpN {
			return float64(a[i*lda+l])
		}
		return float64(a[l*lda+i])
	}
	bt := func(l, j int) float64 {
		if tb == OpN {
			return float64(b[l*ldb+j])
		}
		return float64(b[j*ldb+l])
	}
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += at(i, l) * bt(l, j)
			}
			c[i*ldc+j] = float32(float64(alpha)*s + float64(beta)*float64(c[i*ldc+j]))
		}
	}
}

func randFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	return v
}

// The operand swap that turns a row-major call into a column-major one,
// checked by running the converted call through the column-major
// reference on the same bytes.
func TestGemmRowMajorConversion(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const m, n, k = 5, 7, 3
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
			lda, ldb, ldc := ac+2, bc+1, n+3 // padded rows
			a := randFloats(r, ar*lda)
			b := randFloats(r, br*ldb)
			c0 := randFloats(r, m*ldc)

			want := append([]float32(nil), c0...)
			refGemmRowMajor(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 2, want, ldc)

			g := gemm{op: "SgemmStridedBatchedRowMajor", rowMajor: true, transA: ta, transB: tb, m: m, n: n, k: k,
				alpha: 0.5, beta: 2, a: 1, b: 2, c: 3, lda: lda, ldb: ldb, ldc: ldc, batch: 1}
			require.NoError(t, g.validate())
			cm := g.columnMajor()
			require.NoError(t, cm.validate(), "the converted call is a valid column-major call")
			operand := map[DevicePtr][]float32{1: a, 2: b}
			got := append([]float32(nil), c0...)
			refGemmColMajor(cm.transA, cm.transB, cm.m, cm.n, cm.k, cm.alpha, operand[cm.a], cm.lda,
				operand[cm.b], cm.ldb, cm.beta, got, cm.ldc)
			for i := range want {
				assert.InDelta(t, want[i], got[i], 1e-5, "%s%s element %d", ta, tb, i)
			}
		}
	}
}

func TestGemmColumnMajorUnchanged(t *testing.T) {
	g := gemm{transA: OpT, m: 2, n: 3, k: 4, a: 1, b: 2, lda: 4, ldb: 4, ldc: 2, ta: TypeF16, tb: TypeBF16}
	assert.Equal(t, g, g.columnMajor())
	g.rowMajor = true
	g.sA, g.sB = 10, 20
	cm := g.columnMajor()
	assert.Equal(t, []any{OpN, OpT, 3, 2, DevicePtr(2), DevicePtr(1), int64(20), int64(10), TypeBF16, TypeF16},
		[]any{cm.transA, cm.transB, cm.m, cm.n, cm.a, cm.b, cm.sA, cm.sB, cm.ta, cm.tb})
}

// Validation in the caller's row-major terms (and in column-major terms,
// which the converted call is checked in).
func TestGemmValidation(t *testing.T) {
	base := gemm{op: "SgemmStridedBatchedRowMajor", rowMajor: true, m: 4, n: 5, k: 6, a: 1, b: 2, c: 3,
		lda: 6, ldb: 5, ldc: 5, sA: 24, sB: 30, sC: 20, batch: 2}
	require.NoError(t, base.validate())
	cases := []struct {
		edit func(*gemm)
		want string
	}{
		{func(g *gemm) { g.lda = 5 }, "SgemmStridedBatchedRowMajor: lda = 5 is less than 6: a is stored 4x6 row-major (op N)"},
		{func(g *gemm) { g.transA = OpT; g.lda = 3 }, "lda = 3 is less than 4: a is stored 6x4 row-major (op T)"},
		{func(g *gemm) { g.ldb = 4 }, "ldb = 4 is less than 5: b is stored 6x5 row-major"},
		{func(g *gemm) { g.transB = OpT; g.ldb = 5 }, "ldb = 5 is less than 6: b is stored 5x6 row-major (op T)"},
		{func(g *gemm) { g.ldc = 4 }, "ldc = 4 is less than 5"},
		{func(g *gemm) { g.rowMajor = false; g.lda = 3 }, "lda = 3 is less than 4: a is stored 4x6 column-major (op N)"},
		{func(g *gemm) { g.rowMajor = false; g.lda, g.ldb, g.ldc = 4, 6, 3 }, "ldc = 3 is less than 4"},
		{func(g *gemm) { g.m = -1 }, "m = -1 is outside"},
		{func(g *gemm) { g.k = math.MaxInt32 + 1 }, "k = 2147483648 is outside"},
		{func(g *gemm) { g.batch = -1 }, "batch = -1 is outside"},
		{func(g *gemm) { g.transB = Op(7) }, "unknown operation 7"},
		{func(g *gemm) { g.c = 0 }, "nil C for a 4x5 result"},
		{func(g *gemm) { g.a = 0 }, "nil A or B with k = 6"},
		{func(g *gemm) { g.sA = -1 }, "negative stride (A -1, B 30, C 20)"},
		{func(g *gemm) { g.sC = -20 }, "negative stride"},
		{func(g *gemm) { g.ex, g.compute, g.ta, g.tb, g.tc = true, ComputeType(64), TypeF16, TypeF16, TypeF16 }, "only the float32 compute types"},
		{func(g *gemm) { g.ex, g.compute, g.ta, g.tb, g.tc = true, Compute32F, TypeF16, TypeBF16, TypeF32 }, "A is f16 but B is bf16"},
		{func(g *gemm) { g.ex, g.compute, g.ta, g.tb, g.tc = true, Compute32F, TypeF64, TypeF64, TypeF64 }, "input type f64"},
		{func(g *gemm) { g.ex, g.compute, g.ta, g.tb, g.tc = true, Compute32F, TypeF16, TypeF16, TypeBF16 }, "C is bf16 for f16 inputs"},
	}
	for _, tc := range cases {
		g := base
		tc.edit(&g)
		err := g.validate()
		assert.ErrorIs(t, err, ErrInvalidValue, tc.want)
		assert.ErrorContains(t, err, tc.want)
	}
	// Empty products, and empty batches, need no pointers.
	for _, edit := range []func(*gemm){
		func(g *gemm) { g.m = 0 },
		func(g *gemm) { g.n = 0 },
		func(g *gemm) { g.batch = 0 },
	} {
		g := base
		edit(&g)
		g.a, g.b, g.c = 0, 0, 0
		assert.NoError(t, g.validate(), "%s", g.String())
	}
	// k = 0 scales C by beta: C is needed, A and B are not.
	g := base
	g.k, g.lda, g.a, g.b = 0, 1, 0, 0
	assert.NoError(t, g.validate())
	g = base
	g.ex, g.compute, g.ta, g.tb, g.tc = true, Compute32FFastTF32, TypeBF16, TypeBF16, TypeF32
	assert.NoError(t, g.validate())
	assert.Equal(t, "NN m=4 n=5 k=6 lda=6 ldb=5 ldc=5 strides=24,30,20 batch=2 types=bf16,bf16,f32 compute=32F_FAST_TF32", g.String())
}

func TestBLASTypeNames(t *testing.T) {
	assert.Equal(t, "T", OpT.String())
	assert.Equal(t, 2, TypeBF16.Size())
	assert.Equal(t, 4, TypeF32.Size())
	assert.Equal(t, 0, DataType(99).Size())
	assert.Equal(t, "DataType(99)", DataType(99).String())
	assert.Equal(t, "32F", Compute32F.String())
}

// cuBLAS writes the C matrices of a batch concurrently: a batch whose
// outputs overlap (stride 0, or shorter than a matrix) is refused before
// any call, as tensor's CPU BLAS refuses it, while matrices interleaved
// within rows (heads side by side in one output) are accepted.
func TestGemmRefusesOverlappingCBatch(t *testing.T) {
	c := fakeContext(t)
	bl := fakeBLAS(t, c)
	// 4x5 row-major C matrices, ldc 5: each spans 20 elements.
	run := func(ldc int, strideC int64, batch int) error {
		return bl.SgemmStridedBatchedRowMajor(OpN, OpN, 4, 5, 6, 1, 0x100, 6, 24, 0x200, 5, 30, 0, 0x300, ldc, strideC, batch)
	}
	before := DriverCalls()
	requireArgError(t, run(5, 0, 2), "the 2 C matrices (4x5, ldc = 5) overlap with stride C = 0")
	requireArgError(t, run(5, 19, 3), "the 3 C matrices (4x5, ldc = 5) overlap with stride C = 19")
	requireArgError(t, run(14, 5, 3), "the 3 C matrices (4x5, ldc = 14) overlap with stride C = 5")
	requireArgError(t, run(15, 4, 3), "overlap with stride C = 4")
	assert.Equal(t, uint64(0), DriverCalls()-before, "no cuBLAS call")

	require.NoError(t, run(5, 20, 3), "consecutive matrices")
	require.NoError(t, run(15, 5, 3), "three interleaved matrices in rows of 15")
	require.NoError(t, run(5, 0, 1), "a single product needs no stride")

	g := gemm{op: "Sgemm", m: 4, n: 5, k: 6, a: 1, b: 2, c: 3, lda: 4, ldb: 6, ldc: 4, sA: 24, sB: 30, sC: 19, batch: 2}
	requireArgError(t, g.validate(), "the 2 C matrices (4x5, ldc = 4) overlap with stride C = 19")
	g.sC = 20
	require.NoError(t, g.validate(), "column-major matrices of 4x5 elements")
}
