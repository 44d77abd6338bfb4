//go:build amd64 && !purego

package blas

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The assembly micro-kernels: 6×16 in AVX2+FMA (kernel_amd64.s) and
// 6×32 in AVX-512 (kernel512_amd64.s). x/sys/cpu also checks that the OS
// saves the YMM and ZMM registers.
var (
	avx2Kernel   = &microKernel{name: "AVX2+FMA 6×16 kernel", nr: 16, run: asmTile(kernel6x16), direct: asmDirect(kernel6x16d)}
	avx512Kernel = &microKernel{name: "AVX-512 6×32 kernel", nr: 32, run: asmTile(kernel6x32), direct: asmDirect(kernel6x32d)}
)

// kernels lists the micro-kernels this CPU runs, fastest first.
var kernels = func() []*microKernel {
	var ks []*microKernel
	if cpu.X86.HasAVX512F && cpu.X86.HasFMA {
		ks = append(ks, avx512Kernel)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	return ks
}()

// noKernel says why kernels is empty.
const noKernel = "the CPU lacks AVX2 or FMA"

// kernel6x16 and kernel6x32 compute one tile of C from packed panels.
//
//go:noescape
func kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)

//go:noescape
func kernel6x32(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)

// kernel6x16d and kernel6x32d are kernel6x16 and kernel6x32 reading mr
// rows of a row-major A where they lie, lda floats apart
// (kerneld_amd64.s, kernel512d_amd64.s).
//
//go:noescape
func kernel6x16d(k int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, load int)

//go:noescape
func kernel6x32d(k int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, load int)

// asmDirect adapts a direct assembly kernel to microKernel.direct.
func asmDirect(f func(k int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, load int)) func(k int, a []float32, lda int, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	return func(k int, a []float32, lda int, bp, c []float32, ldc int, alpha, beta float32, load bool) {
		l := 0
		if load {
			l = 1
		}
		f(k, unsafe.SliceData(a), lda, unsafe.SliceData(bp), unsafe.SliceData(c), ldc, alpha, beta, l)
	}
}

// asmTile adapts an assembly kernel to microKernel.run.
func asmTile(f func(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)) func(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	return func(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
		l := 0
		if load {
			l = 1
		}
		f(k, unsafe.SliceData(ap), unsafe.SliceData(bp), unsafe.SliceData(c), ldc, alpha, beta, l)
	}
}
