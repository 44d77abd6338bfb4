package tensor

import (
	"fmt"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// matmul runs float32 products on cuBLAS (strided batched, row-major, on
// the device's stream; default math, so no TF32) and float64 products on
// the gemm_f64 kernel (kernels/gemm.cuh), which serves gradient checks
// and references.
func (b cudaBackend) matmul(c, a, bm *Tensor, tA, tB bool, m, n, k, batch, sA, sB int, alpha, beta float64) {
	d := b.d
	f := floatIndex("MatMul", c.dtype)
	if m*n*batch == 0 {
		return
	}
	lda, ldb := k, n
	if tA {
		lda = m
	}
	if tB {
		ldb = k
	}
	if f == kF64 {
		grid := [3]uint32{uint32(ceilDiv(n, 16)), uint32(ceilDiv(m, 16)), uint32(min(batch, maxGridYZ))}
		if grid[1] > maxGridYZ {
			fail("MatMul", ErrShape, "%d rows exceed the float64 kernel's grid (%d) on %v", m, maxGridYZ*16, d)
		}
		d.launch("MatMul", d.k.gemmF64, grid, [3]uint32{16, 16, 1}, func(x *cuda.Args) {
			x.Int32(boolArg(tA)).Int32(boolArg(tB)).Int64(int64(m)).Int64(int64(n)).Int64(int64(k)).Float64(alpha).
				Ptr(devPtr(a)).Int64(int64(lda)).Int64(int64(sA)).
				Ptr(devPtr(bm)).Int64(int64(ldb)).Int64(int64(sB)).
				Float64(beta).Ptr(devPtr(c)).Int64(int64(n)).Int64(int64(m * n)).Int64(int64(batch))
		})
		return
	}
	blas, err := d.cuBLAS()
	if err != nil {
		panic(&OpError{Op: "MatMul", Msg: fmt.Sprintf("float32 products on %v need cuBLAS", d), Err: err})
	}
	op := func(t bool) cuda.Op {
		if t {
			return cuda.OpT
		}
		return cuda.OpN
	}
	if cudaProfiling {
		defer d.profileDone(fmt.Sprintf("MatMul sgemm %dx%dx%d batch %d", m, n, k, batch), time.Now())
	}
	err = blas.SgemmStridedBatchedRowMajor(op(tA), op(tB), m, n, k, float32(alpha),
		devPtr(a), lda, int64(sA), devPtr(bm), ldb, int64(sB), float32(beta), devPtr(c), n, int64(m*n), batch)
	if err != nil {
		panic(&OpError{Op: "MatMul", Msg: fmt.Sprintf("(%d x %d) @ (%d x %d), batch %d, on %v", m, k, k, n, batch, d), Err: err})
	}
}
