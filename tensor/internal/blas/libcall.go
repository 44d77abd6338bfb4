//go:build (linux || darwin || freebsd || netbsd) && !android && (amd64 || arm64)

package blas

import (
	"math"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// frame holds the arguments of one Fortran ?gemm_ call. Fortran takes
// every argument by address, so the scalars live here, on the heap (a
// pooled frame, so a call allocates nothing), and argv holds their
// addresses. The frame also holds the operand pointers as unsafe.Pointer
// for the duration of the call, which keeps the Go slices alive while
// the library reads them; the Go heap does not move objects.
type frame[T float] struct {
	transA, transB         byte // 'N' or 'T'
	m, n, k, lda, ldb, ldc int32
	alpha, beta            T
	a, b, c                unsafe.Pointer
	argv                   [15]uintptr
}

var (
	frames32 = sync.Pool{New: func() any { return new(frame[float32]) }}
	frames64 = sync.Pool{New: func() any { return new(frame[float64]) }}
)

// fitsLP64 reports whether every integer argument of p fits the 32-bit
// Fortran INTEGER of an LP64 library.
func fitsLP64[T float](p *problem[T]) bool {
	return max(p.m, p.n, p.k, p.lda, p.ldb, p.ldc) <= math.MaxInt32
}

// load fills f for row-major p. A row-major matrix is the column-major
// matrix of its transpose, so C = op(A)·op(B) is computed as the
// column-major C^T = op(B)^T·op(A)^T: the operands swap places, and so do
// m and n, while each keeps its own transpose flag and leading dimension.
func (f *frame[T]) load(p *problem[T]) {
	f.transA, f.transB = flag(p.tB), flag(p.tA)
	f.m, f.n, f.k = int32(p.n), int32(p.m), int32(p.k)
	f.lda, f.ldb, f.ldc = int32(p.ldb), int32(p.lda), int32(p.ldc)
	f.alpha, f.beta = p.alpha, p.beta
	f.a, f.b, f.c = unsafe.Pointer(&p.b[0]), unsafe.Pointer(&p.a[0]), unsafe.Pointer(&p.c[0])
	f.argv = [15]uintptr{
		uintptr(unsafe.Pointer(&f.transA)), uintptr(unsafe.Pointer(&f.transB)),
		uintptr(unsafe.Pointer(&f.m)), uintptr(unsafe.Pointer(&f.n)), uintptr(unsafe.Pointer(&f.k)),
		uintptr(unsafe.Pointer(&f.alpha)),
		uintptr(f.a), uintptr(unsafe.Pointer(&f.lda)),
		uintptr(f.b), uintptr(unsafe.Pointer(&f.ldb)),
		uintptr(unsafe.Pointer(&f.beta)),
		uintptr(f.c), uintptr(unsafe.Pointer(&f.ldc)),
		1, 1, // hidden lengths of the two CHARACTER arguments (gfortran ABI)
	}
}

func (f *frame[T]) release() { f.a, f.b, f.c = nil, nil, nil }

func flag(trans bool) byte {
	if trans {
		return 'T'
	}
	return 'N'
}

// gemm32 and gemm64 run one product on the calling thread. The caller
// has checked p and guarantees m, n, k > 0 and alpha != 0, so that every
// operand has a first element.
func (l *library) gemm32(p problem[float32]) {
	if !fitsLP64(&p) {
		gonumGemm32(p)
		return
	}
	f := frames32.Get().(*frame[float32])
	f.load(&p)
	purego.SyscallN(l.sgemm, f.argv[:]...)
	f.release()
	frames32.Put(f)
}

func (l *library) gemm64(p problem[float64]) {
	if !fitsLP64(&p) {
		gonumGemm64(p)
		return
	}
	f := frames64.Get().(*frame[float64])
	f.load(&p)
	purego.SyscallN(l.dgemm, f.argv[:]...)
	f.release()
	frames64.Put(f)
}
