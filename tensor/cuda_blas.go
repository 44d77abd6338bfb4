package tensor

import (
	"fmt"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// matmul runs float32 products on cuBLAS (strided batched, row-major, on
// the device's stream; no TF32 unless tf32), float16 and bfloat16
// products on cuBLAS's GemmEx with float32 accumulation (tensor cores;
// the product in float32 or the operands' dtype), and float64 products on
// the gemm_f64 kernel (kernels/gemm.cuh), which serves gradient checks
// and references.
func (b cudaBackend) matmul(c, a, bm *Tensor, tA, tB bool, m, n, k, batch, sA, sB int, alpha, beta float64, tf32 bool) {
	d := b.d
	if m*n*batch == 0 {
		return
	}
	lda, ldb := leadingDims(tA, tB, m, n, k)
	if a.dtype == Float64 {
		// The kernel's grid covers the rows with blockIdx.y (at most
		// maxGridYZ tiles of 16) without striding: taller products run
		// as bands of rows, each a launch on its own rows of A and C
		// (the CPU has no such limit; a batch folded into the rows by
		// MatMul reaches it at a million rows).
		const band = maxGridYZ * 16
		pa, pb, pc := devPtr(a), devPtr(bm), devPtr(c) // one access each, however many bands
		for r0 := 0; r0 < m; r0 += band {
			rows := min(band, m-r0)
			offA := r0 * lda // row r0 of A, or column r0 of the stored k x m A
			if tA {
				offA = r0
			}
			grid := [3]uint32{uint32(ceilDiv(n, 16)), uint32(ceilDiv(rows, 16)), uint32(min(batch, maxGridYZ))}
			d.launch("MatMul", d.k.gemmF64, grid, [3]uint32{16, 16, 1}, func(x *cuda.Args) {
				x.Int32(boolArg(tA)).Int32(boolArg(tB)).Int64(int64(rows)).Int64(int64(n)).Int64(int64(k)).Float64(alpha).
					Ptr(pa.Add(offA * 8)).Int64(int64(lda)).Int64(int64(sA)).
					Ptr(pb).Int64(int64(ldb)).Int64(int64(sB)).
					Float64(beta).Ptr(pc.Add(r0 * n * 8)).Int64(int64(n)).Int64(int64(m * n)).Int64(int64(batch))
			})
		}
		return
	}
	blas, err := d.cuBLAS()
	if err != nil {
		panic(&OpError{Op: "MatMul", Msg: fmt.Sprintf("%v products on %v need cuBLAS", a.dtype, d), Err: err})
	}
	// kind names the call in profiles and errors (formatted only then: a
	// launch must not pay for it).
	kind := func() string {
		if a.dtype == Float32 && !tf32 {
			return "sgemm"
		}
		return fmt.Sprintf("gemmEx %v->%v tf32=%v", a.dtype, c.dtype, tf32)
	}
	if cudaProfiling {
		defer d.profileDone(fmt.Sprintf("MatMul %s %dx%dx%d batch %d", kind(), m, n, k, batch), time.Now())
	}
	if a.dtype == Float32 && !tf32 {
		err = blas.SgemmStridedBatchedRowMajor(blasOp(tA), blasOp(tB), m, n, k, float32(alpha),
			devPtr(a), lda, int64(sA), devPtr(bm), ldb, int64(sB), float32(beta), devPtr(c), n, int64(m*n), batch)
	} else {
		compute := cuda.Compute32F
		if tf32 && a.dtype == Float32 {
			compute = cuda.Compute32FFastTF32
		}
		err = blas.GemmStridedBatchedExRowMajor(blasOp(tA), blasOp(tB), m, n, k, float32(alpha),
			devPtr(a), blasType(a.dtype), lda, int64(sA), devPtr(bm), blasType(bm.dtype), ldb, int64(sB),
			float32(beta), devPtr(c), blasType(c.dtype), n, int64(m*n), batch, compute)
	}
	if err != nil {
		panic(&OpError{Op: "MatMul", Msg: fmt.Sprintf("%s (%d x %d) @ (%d x %d), batch %d, on %v", kind(), m, k, k, n, batch, d), Err: err})
	}
}

// blasType is cuBLAS's name for a float dtype other than float64.
func blasType(dt DType) cuda.DataType {
	switch dt {
	case Float16:
		return cuda.TypeF16
	case BFloat16:
		return cuda.TypeBF16
	}
	return cuda.TypeF32
}

// leadingDims returns the row strides of contiguous row-major A (m x k, or
// k x m stored when tA) and B (k x n, or n x k when tB).
func leadingDims(tA, tB bool, m, n, k int) (lda, ldb int) {
	lda, ldb = k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	return lda, ldb
}

// blasOp is cuBLAS's name for an operand used as stored or transposed.
func blasOp(t bool) cuda.Op {
	if t {
		return cuda.OpT
	}
	return cuda.OpN
}
