package tensor

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// EnvCUBLASLt set to "off" makes products with an epilogue (MatMulBias,
// MatMulRowSums) run as the product and a separate op on the GPU too, as
// without cuBLASLt: for comparisons, and as a fallback. Read at every
// call.
const EnvCUBLASLt = "STRATA_CUBLASLT"

// cuBLASLt returns the device's cuBLASLt handle, made once on its stream
// and sharing cuBLAS's workspace (both run on the one stream, never at
// once).
func (d *cudaDevice) cuBLASLt() (*cuda.BLASLt, error) {
	d.ltOnce.Do(func() {
		if _, err := d.cuBLAS(); err != nil {
			d.ltErr = err
			return
		}
		lt, err := d.ctx.NewBLASLt()
		if err != nil {
			d.ltErr = err
			return
		}
		if err := errors.Join(lt.SetStream(d.stream), lt.SetWorkspace(cuda.DevicePtr(d.blasWS.Addr()), int(d.blasWS.Size()))); err != nil {
			_ = lt.Destroy()
			d.ltErr = err
			return
		}
		d.lt = lt
	})
	return d.lt, d.ltErr
}

// matmulEpilogue runs the product on cuBLASLt with the bias added in its
// epilogue (EPILOGUE_BIAS) or the row sums of op(A) taken by it (the bias
// gradient, BGRADB in cuBLASLt's column-major terms). Float64 products,
// a device without cuBLASLt, STRATA_CUBLASLT=off and problems cuBLASLt
// has no kernel for return false: the caller composes the ops.
func (b cudaBackend) matmulEpilogue(c, a, bm, vec *Tensor, tA, tB bool, m, n, k int, epi epilogue, tf32 bool) bool {
	d := b.d
	if a.dtype == Float64 || os.Getenv(EnvCUBLASLt) == "off" {
		return false
	}
	lt, err := d.cuBLASLt()
	if err != nil {
		return false
	}
	lda, ldb := leadingDims(tA, tB, m, n, k)
	compute := cuda.Compute32F
	if tf32 && a.dtype == Float32 {
		compute = cuda.Compute32FFastTF32
	}
	e := cuda.EpilogueBias
	if epi == epiRowSumsA {
		e = cuda.EpilogueBiasGradA
	}
	if cudaProfiling {
		defer d.profileDone(fmt.Sprintf("MatMul cublasLt %v %v->%v %dx%dx%d", epi, a.dtype, c.dtype, m, n, k), time.Now())
	}
	err = lt.Matmul(cuda.LtMatmul{
		TransA: blasOp(tA), TransB: blasOp(tB), M: m, N: n, K: k, Alpha: 1, Beta: 0,
		A: devPtr(a), TypeA: blasType(a.dtype), LDA: lda,
		B: devPtr(bm), TypeB: blasType(bm.dtype), LDB: ldb,
		C: devPtr(c), TypeC: blasType(c.dtype), LDC: n,
		Compute: compute, Epilogue: e, Bias: devPtr(vec), TypeBias: blasType(vec.dtype),
	})
	if errors.Is(err, cuda.ErrNotSupported) {
		return false
	}
	if err != nil {
		panic(&OpError{Op: "MatMul", Msg: fmt.Sprintf("cuBLASLt product with %v, %v (%d x %d) @ (%d x %d) on %v", epi, a.dtype, m, k, k, n, d), Err: err})
	}
	return true
}
