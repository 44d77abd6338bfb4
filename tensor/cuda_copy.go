package tensor

import (
	"math"
	"os"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/tensor/internal/layout"
)

// Host transfers are queued on the device's stream, so they are ordered
// with the kernels around them: an upload never overtakes a kernel still
// reading a recycled block. From pageable Go memory, cuMemcpyHtoDAsync
// returns once the bytes are staged (src may be reused at once) and
// cuMemcpyDtoHAsync once they have arrived.

func (b cudaBackend) upload(dst *Tensor, src []byte) {
	d := b.d
	d.refuseInCapture("upload", "copying host data to the device")
	d.mu.Lock()
	defer d.mu.Unlock()
	d.check("upload", "copying host memory to the device", d.q.copyHtoD(devPtr(dst), src))
}

// download copies src to the host. It panics with the pending bad-data
// report, if a kernel made one (callers synchronize first, which reports
// it as an error; this catches a report made in between).
func (b cudaBackend) download(dst []byte, src *Tensor) {
	d := b.d
	d.refuseInCapture("download", "reading device memory on the host")
	d.mu.Lock()
	defer d.mu.Unlock()
	d.check("download", "copying device memory to the host", d.q.copyDtoH(dst, devPtr(src)))
	if err := d.status.take(d); err != nil {
		panic(err)
	}
}

// EnvVMMCopyEngine=1 makes device-to-device copies use the copy engine
// (cuMemcpyDtoDAsync) with expandable device memory too, where they use
// the copy kernel (copyDevice): a diagnostic for telling the two apart.
const EnvVMMCopyEngine = "STRATA_VMM_COPY_ENGINE"

var vmmCopyEngine = os.Getenv(EnvVMMCopyEngine) == "1"

// copyDevice copies n bytes between device addresses on the stream: with
// cuMemcpyDtoDAsync, or, when device memory is expandable (d.vmm), with
// the copy2d kernel over the widest words that n and both addresses
// allow. On the H200 (driver 580) cuMemcpyDtoDAsync between ranges of
// expandable segments failed now and then with CUDA_ERROR_INVALID_VALUE
// (a 24 MiB WriteNarrow in a gpt2 step, 2026-12-02), where kernels
// reading and writing the same memory never did.
func (d *cudaDevice) copyDevice(op string, dst, src cuda.DevicePtr, n int) {
	if kb, w, ok := copyWords(n, uintptr(dst), uintptr(src)); d.vmm && ok && !vmmCopyEngine {
		d.launch1(op, d.k.copy2D[kb], w, func(a *cuda.Args) {
			a.Ptr(dst).Ptr(src).Int64(1).Int64(int64(w)).Int64(int64(w)).Int64(int64(w))
		})
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.check(op, "copying device memory", d.q.copyDtoD(dst, src, n))
}

// copyWords picks the widest words (8, 4 or 2 bytes) that n bytes and both
// addresses allow for the copy2d kernel: its size index and the number of
// words; false for n <= 0 or when only bytes would do (there is no byte
// kernel).
func copyWords(n int, dst, src uintptr) (kb, words int, ok bool) {
	for i, sz := range [...]int{8, 4, 2} {
		if n > 0 && n%sz == 0 && dst%uintptr(sz) == 0 && src%uintptr(sz) == 0 {
			return [...]int{kB8, kB4, kB2}[i], n / sz, true
		}
	}
	return 0, 0, false
}

func (b cudaBackend) copyStrided(dst, src *Tensor, l layout.Layout) {
	d, n, sz := b.d, dst.Numel(), dst.dtype.Size()
	if n == 0 {
		return
	}
	if !cudaLayoutFits(&l) {
		fail("Clone", ErrShape, "the view (shape %v, strides %v) has %d dims that cannot be merged; the cuda kernels take at most %d", src.shape, src.strides, l.NDim, cudaMaxDims)
	}
	if l.Contiguous(1) {
		d.copyDevice("Clone", devPtr(dst), devPtr(src), n*sz)
		return
	}
	s := sizeIndex(dst.dtype)
	var buf [8 + 16*8]byte
	if l.Transposed() {
		// The innermost two dims are a transpose: tile through shared memory.
		R, C := l.Shape[l.NDim-2], l.Shape[l.NDim-1]
		grid := [3]uint32{uint32(ceilDiv(C, 32)), uint32(ceilDiv(R, 32)), uint32(min(n/(R*C), maxGridYZ))}
		if ceilDiv(R, 32) <= maxGridYZ {
			d.launch("Clone", d.k.copyTranspose[s], grid, [3]uint32{32, 8, 1}, func(a *cuda.Args) {
				a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Bytes(layoutBytes1(&l, &buf), 8)
			})
			return
		}
	}
	if w, ok := widenLayout(l, sz, peekPtr(dst), peekPtr(src)); ok {
		n /= 16 / sz
		d.launch1("Clone", d.k.copyWide[indexVariant(n)], n, func(a *cuda.Args) {
			a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n)).Bytes(layoutBytes1(&w, &buf), 8)
		})
		return
	}
	d.launch1("Clone", d.k.copyStrided[s][indexVariant(n)], n, func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n)).Bytes(layoutBytes1(&l, &buf), 8)
	})
}

// widenLayout folds groups of f = 16/sz elements of a strided copy into
// 16-byte words: possible when the innermost dim is contiguous with a
// length that f divides, every other stride is a multiple of f, and both
// addresses are 16-byte aligned. The copy then moves 16 bytes a thread.
func widenLayout(l layout.Layout, sz int, dst, src cuda.DevicePtr) (layout.Layout, bool) {
	f, last := 16/sz, l.NDim-1
	if l.NDim < 2 || f < 2 || dst%16 != 0 || src%16 != 0 || l.Strides[0][last] != 1 || l.Shape[last]%f != 0 {
		return l, false
	}
	for d := range last {
		if l.Strides[0][d]%f != 0 {
			return l, false
		}
	}
	for d := range last {
		l.Strides[0][d] /= f
	}
	l.Shape[last] /= f
	return l, true
}

func (b cudaBackend) copy2D(dst, src *Tensor, rows, width, dstStride, dstOff, srcStride, srcOff int) {
	d, sz := b.d, dst.dtype.Size()
	if rows*width == 0 {
		return
	}
	dp, sp := devPtr(dst).Add(dstOff*sz), devPtr(src).Add(srcOff*sz)
	if rows == 1 || (width == dstStride && width == srcStride) {
		d.copyDevice("WriteNarrow", dp, sp, rows*width*sz)
		return
	}
	d.launch1("WriteNarrow", d.k.copy2D[sizeIndex(dst.dtype)], rows*width, func(a *cuda.Args) {
		a.Ptr(dp).Ptr(sp).Int64(int64(rows)).Int64(int64(width)).Int64(int64(dstStride)).Int64(int64(srcStride))
	})
}

// fill converts v to dst's dtype on the host, exactly as the CPU backend
// does, and stores the bit pattern with one kernel.
func (b cudaBackend) fill(dst *Tensor, v float64) {
	d, n := b.d, dst.Numel()
	if n == 0 {
		return
	}
	var bits uint64
	switch dst.dtype {
	case Float32:
		bits = uint64(math.Float32bits(float32(v)))
	case Float64:
		bits = math.Float64bits(v)
	case Int32:
		bits = uint64(uint32(int32Of(v)))
	case Float16, BFloat16:
		bits = uint64(halfBits(dst.dtype, v))
	}
	s := sizeIndex(dst.dtype)
	d.launchVec("Fill", d.k.fill[s], n, dst.dtype.Size(), func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Int64(int64(n))
		switch s {
		case kB2:
			a.Uint16(uint16(bits))
		case kB4:
			a.Uint32(uint32(bits))
		default:
			a.Uint64(bits)
		}
	})
}

// cast converts between any two dtypes, bit for bit as the CPU (see
// kernels/cast.cuh); equal dtypes copy.
func (b cudaBackend) cast(dst, src *Tensor) {
	d, n := b.d, dst.Numel()
	if n == 0 {
		return
	}
	if src.dtype == dst.dtype {
		d.copyDevice("To", devPtr(dst), devPtr(src), n*dst.dtype.Size())
		return
	}
	d.launchVec("To", d.k.cast[src.dtype][dst.dtype], n, max(src.dtype.Size(), dst.dtype.Size()), func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(n))
	})
}
