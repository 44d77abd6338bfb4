package cuda

import (
	"fmt"
	"math"
)

// gemm describes one strided batched GEMM call in either layout: the
// public methods fill it in row-major terms and validate it in those
// terms, and run converts it to the column-major call cuBLAS makes.
type gemm struct {
	op             string // public method, for messages
	rowMajor       bool
	ex             bool // GemmStridedBatchedEx: types and compute given
	transA, transB Op
	m, n, k        int
	alpha, beta    float32
	a, b, c        DevicePtr
	lda, ldb, ldc  int
	sA, sB, sC     int64
	batch          int
	ta, tb, tc     DataType
	compute        ComputeType
}

// storedShape returns the rows and columns of an operand as stored: an
// r x c matrix used with op is stored as r x c for OpN, c x r otherwise.
func storedShape(op Op, r, c int) (int, int) {
	if op == OpN {
		return r, c
	}
	return c, r
}

// validate checks g in the caller's layout, with messages in its terms.
func (g *gemm) validate() error {
	for _, t := range []Op{g.transA, g.transB} {
		if t != OpN && t != OpT && t != OpC {
			return invalidArg(g.op, "unknown operation %d (use OpN, OpT or OpC)", int32(t))
		}
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"m", g.m}, {"n", g.n}, {"k", g.k}, {"lda", g.lda}, {"ldb", g.ldb}, {"ldc", g.ldc}, {"batch", g.batch}} {
		if d.v < 0 || d.v > math.MaxInt32 {
			return invalidArg(g.op, "%s = %d is outside 0..%d", d.name, d.v, math.MaxInt32)
		}
	}
	layout := "column-major"
	if g.rowMajor {
		layout = "row-major"
	}
	// Leading dimension: the stride between columns (column-major) or
	// rows (row-major) of the matrix as stored.
	check := func(name string, op Op, r, c, ld int) error {
		sr, sc := storedShape(op, r, c)
		need := sr
		if g.rowMajor {
			need = sc
		}
		if ld < max(1, need) {
			return invalidArg(g.op, "ld%s = %d is less than %d: %s is stored %dx%d %s (op %s)", name, ld, max(1, need), name, sr, sc, layout, op)
		}
		return nil
	}
	if err := check("a", g.transA, g.m, g.k, g.lda); err != nil {
		return err
	}
	if err := check("b", g.transB, g.k, g.n, g.ldb); err != nil {
		return err
	}
	if err := check("c", OpN, g.m, g.n, g.ldc); err != nil {
		return err
	}
	if g.m > 0 && g.n > 0 && g.batch > 0 {
		if g.c == 0 {
			return invalidArg(g.op, "nil C for a %dx%d result", g.m, g.n)
		}
		if g.k > 0 && (g.a == 0 || g.b == 0) {
			return invalidArg(g.op, "nil A or B with k = %d", g.k)
		}
	}
	if g.sA < 0 || g.sB < 0 || g.sC < 0 {
		return invalidArg(g.op, "negative stride (A %d, B %d, C %d)", g.sA, g.sB, g.sC)
	}
	if err := g.checkDisjointC(); err != nil {
		return err
	}
	if g.ex {
		switch g.compute {
		case Compute32F, Compute32FPedantic, Compute32FFast16F, Compute32FFast16BF, Compute32FFastTF32:
		default:
			return invalidArg(g.op, "compute type %s: only the float32 compute types are supported", g.compute)
		}
		if g.ta != g.tb {
			return invalidArg(g.op, "A is %s but B is %s: both inputs must have one type", g.ta, g.tb)
		}
		if g.ta != TypeF32 && g.ta != TypeF16 && g.ta != TypeBF16 {
			return invalidArg(g.op, "input type %s: use f32, f16 or bf16", g.ta)
		}
		if g.tc != g.ta && g.tc != TypeF32 {
			return invalidArg(g.op, "C is %s for %s inputs: use %s or f32", g.tc, g.ta, g.ta)
		}
	}
	return nil
}

// checkDisjointC refuses a batch whose C matrices share an element:
// cuBLAS writes the products of a batch concurrently, so overlapping
// outputs (a stride of 0 for C, or one shorter than a matrix) would race
// and leave garbage without an error. As in tensor's CPU BLAS, the
// matrices may interleave within lines (attention heads written side by
// side into one output), as long as the lines of all of them fit in ldc.
// A line is a row (row-major) or a column (column-major) of C as stored.
func (g *gemm) checkDisjointC() error {
	if g.m == 0 || g.n == 0 || g.batch <= 1 {
		return nil
	}
	lines, width := g.n, g.m
	if g.rowMajor {
		lines, width = g.m, g.n
	}
	// All values are at most MaxInt32 (checked above): no overflow in int64.
	extent := int64(lines-1)*int64(g.ldc) + int64(width)
	if g.sC >= extent {
		return nil
	}
	if g.sC >= int64(width) && g.sC <= int64(g.ldc-width)/int64(g.batch-1) {
		return nil // interleaved: (batch-1)*sC + width <= ldc
	}
	return invalidArg(g.op, "the %d C matrices (%dx%d, ldc = %d) overlap with stride C = %d: a batch's products are written concurrently",
		g.batch, g.m, g.n, g.ldc, g.sC)
}

// columnMajor returns the call cuBLAS must make. A row-major matrix is
// the transpose of the same bytes read column-major, so row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands
// (with their ops, leading dimensions, strides and types) and m with n.
func (g gemm) columnMajor() gemm {
	if !g.rowMajor {
		return g
	}
	g.rowMajor = false
	g.transA, g.transB = g.transB, g.transA
	g.m, g.n = g.n, g.m
	g.a, g.b = g.b, g.a
	g.lda, g.ldb = g.ldb, g.lda
	g.sA, g.sB = g.sB, g.sA
	g.ta, g.tb = g.tb, g.ta
	return g
}

func (g *gemm) String() string {
	s := fmt.Sprintf("%s%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d strides=%d,%d,%d batch=%d",
		g.transA, g.transB, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.sA, g.sB, g.sC, g.batch)
	if g.ex {
		s += fmt.Sprintf(" types=%s,%s,%s compute=%s", g.ta, g.tb, g.tc, g.compute)
	}
	return s
}

// run validates g, converts it to column-major and calls cuBLAS.
func (bl *BLAS) run(g gemm) error {
	if err := g.validate(); err != nil {
		return err
	}
	if g.m == 0 || g.n == 0 || g.batch == 0 {
		return nil // nothing to compute
	}
	if err := bl.made(g.op); err != nil {
		return err
	}
	cm := g.columnMajor()
	bl.mu.Lock()
	defer bl.mu.Unlock()
	if bl.destroyed {
		return invalidArg(g.op, "cuBLAS handle was destroyed")
	}
	if err := boundStream(g.op, bl.stream); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	f.scal[0], f.scal[1] = cm.alpha, cm.beta
	alpha, beta := f.scalAddr(0), f.scalAddr(1)
	h, ta, tb := bl.h, uintptr(cm.transA), uintptr(cm.transB)
	m, n, k := uintptr(cm.m), uintptr(cm.n), uintptr(cm.k)
	A, B, C := uintptr(cm.a), uintptr(cm.b), uintptr(cm.c)
	lda, ldb, ldc := uintptr(cm.lda), uintptr(cm.ldb), uintptr(cm.ldc)
	sA, sB, sC, batch := uintptr(cm.sA), uintptr(cm.sB), uintptr(cm.sC), uintptr(cm.batch)
	at, bt, ct, comp := uintptr(cm.ta), uintptr(cm.tb), uintptr(cm.tc), uintptr(cm.compute)
	algo := gemmAlgoDefault
	sym := bl.lib.sgemmStridedBatched
	var st uint32
	var err error
	if g.ex {
		sym = bl.lib.gemmStridedBatchedEx
		st, err = bl.invoke(f, sym, h, ta, tb, m, n, k, alpha, A, at, lda, sA, B, bt, ldb, sB, beta, C, ct, ldc, sC, batch, comp, algo)
	} else {
		st, err = bl.invoke(f, sym, h, ta, tb, m, n, k, alpha, A, lda, sA, B, ldb, sB, beta, C, ldc, sC, batch)
	}
	if err != nil {
		return err
	}
	if st != cublasStatusSuccess {
		return newBLASError(bl.lib, sym.name, st, g.op+" "+g.String())
	}
	return nil
}

// SgemmStridedBatchedRowMajor computes batch float32 products C_i =
// alpha op(A_i) op(B_i) + beta C_i with row-major matrices, as
// cublasSgemmStridedBatched does for column-major ones: op(A_i) is m x k,
// op(B_i) k x n, C_i m x n; lda, ldb and ldc are the strides between rows
// (the row length for dense matrices), and matrix i of each operand starts
// stride*i elements after the first (a stride of 0 shares one A or B
// across the batch; the C matrices must not overlap). It runs the
// column-major product C^T = op(B)^T op(A)^T on the same bytes.
func (bl *BLAS) SgemmStridedBatchedRowMajor(transA, transB Op, m, n, k int, alpha float32,
	a DevicePtr, lda int, strideA int64, b DevicePtr, ldb int, strideB int64,
	beta float32, c DevicePtr, ldc int, strideC int64, batch int) error {
	return bl.run(gemm{op: "SgemmStridedBatchedRowMajor", rowMajor: true, transA: transA, transB: transB,
		m: m, n: n, k: k, alpha: alpha, beta: beta, a: a, b: b, c: c, lda: lda, ldb: ldb, ldc: ldc,
		sA: strideA, sB: strideB, sC: strideC, batch: batch})
}

// GemmStridedBatchedExRowMajor is SgemmStridedBatchedRowMajor with typed
// operands (cublasGemmStridedBatchedEx): A and B are f16, bf16 or f32 (the
// same type), C is the input type or f32, and the products accumulate with
// a float32 compute type (Compute32F, or a faster variant). alpha and beta
// are float32. cuBLAS chooses the algorithm (CUBLAS_GEMM_DEFAULT).
func (bl *BLAS) GemmStridedBatchedExRowMajor(transA, transB Op, m, n, k int, alpha float32,
	a DevicePtr, aType DataType, lda int, strideA int64, b DevicePtr, bType DataType, ldb int, strideB int64,
	beta float32, c DevicePtr, cType DataType, ldc int, strideC int64, batch int, compute ComputeType) error {
	return bl.run(gemm{op: "GemmStridedBatchedExRowMajor", rowMajor: true, ex: true,
		transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta, a: a, b: b, c: c,
		lda: lda, ldb: ldb, ldc: ldc, sA: strideA, sB: strideB, sC: strideC, batch: batch,
		ta: aType, tb: bType, tc: cType, compute: compute})
}
