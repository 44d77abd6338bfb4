//go:build amd64 && !purego

package blas

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveKernel reports whether the package's own float32 GEMM can run: the
// 6×16 micro-kernel of kernel_amd64.s needs AVX2 and FMA (and an OS that
// saves the YMM registers, which x/sys/cpu checks too).
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kernelName names the micro-kernel in Backend().
const kernelName = "AVX2+FMA 6×16 kernel"

// noKernel says why haveKernel is false.
const noKernel = "the CPU lacks AVX2 or FMA"

// kernel6x16 computes one 6×16 tile of C from packed panels; see
// kernel_amd64.s.
//
//go:noescape
func kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)

// tile runs the micro-kernel: C[0:mr, 0:nr] at c (row distance ldc) =
// alpha*ap·bp + beta*C, C read only when load. The caller guarantees
// that the panels hold k steps and that the tile lies inside c.
func tile(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	l := 0
	if load {
		l = 1
	}
	kernel6x16(k, unsafe.SliceData(ap), unsafe.SliceData(bp), unsafe.SliceData(c), ldc, alpha, beta, l)
}
