package tensor

import "github.com/strata-ml/strata/cuda"

// cudaQueue is the handful of driver operations the CUDA backend queues
// work with. streamQueue, the real one, orders everything on the device's
// stream; the tests substitute a recorder that checks every launch
// against the kernels' parameter tables without a GPU.
type cudaQueue interface {
	launch(fn *cuda.Function, grid, block [3]uint32, a *cuda.Args) error
	copyDtoD(dst, src cuda.DevicePtr, n int) error
	copyHtoD(dst cuda.DevicePtr, src []byte) error
	copyDtoH(dst []byte, src cuda.DevicePtr) error
	clearWord(p cuda.DevicePtr) error
	sync() error
}

// streamQueue queues on one stream of one context: one driver call each.
type streamQueue struct {
	ctx    *cuda.Context
	stream *cuda.Stream
	// syncPageable makes host copies synchronous: the stream is drained,
	// then cuMemcpyHtoD or cuMemcpyDtoH runs, and after cuMemcpyHtoD the
	// context is synchronised too. Set when device memory is mapped
	// through the virtual memory API (expandable segments): there,
	// cuMemcpyHtoDAsync and cuMemcpyDtoHAsync of pageable memory over a few
	// MiB failed now and then with CUDA_ERROR_INVALID_VALUE on the H200
	// (driver 580; cuda's TestGPUVMMCopies), where synchronous and pinned
	// copies never did. The synchronous copies run on the legacy default
	// stream, which our streams (CU_STREAM_NON_BLOCKING) do not wait for,
	// and cuMemcpyHtoD from pageable memory returns once the bytes are
	// staged, before they reach the device (CUDA's "API synchronization
	// behavior"): without the synchronisation after it, the kernels queued
	// next read the destination before the copy lands. That race was the
	// wrong training results on expandable memory until session 20
	// (bench/results/expandable-gpu-2026-12-03-s20.md: right with frequent
	// garbage collection or a synchronisation at every release, which gave
	// the copies time). The cost is two synchronisations an upload.
	syncPageable bool
}

func (q streamQueue) launch(fn *cuda.Function, grid, block [3]uint32, a *cuda.Args) error {
	return q.ctx.LaunchKernelArgs(fn, grid, block, 0, q.stream, a)
}

func (q streamQueue) copyDtoD(dst, src cuda.DevicePtr, n int) error {
	return q.ctx.MemcpyDtoDAsync(dst, src, n, q.stream)
}

func (q streamQueue) copyHtoD(dst cuda.DevicePtr, src []byte) error {
	if q.syncPageable {
		if err := q.stream.Synchronize(); err != nil {
			return err
		}
		if err := q.ctx.MemcpyHtoD(dst, src); err != nil {
			return err
		}
		return q.ctx.Synchronize() // the copy has landed before anything queued after it runs
	}
	return q.ctx.MemcpyHtoDAsync(dst, src, q.stream)
}

func (q streamQueue) copyDtoH(dst []byte, src cuda.DevicePtr) error {
	if q.syncPageable {
		if err := q.stream.Synchronize(); err != nil {
			return err
		}
		return q.ctx.MemcpyDtoH(dst, src)
	}
	return q.ctx.MemcpyDtoHAsync(dst, src, q.stream)
}

func (q streamQueue) clearWord(p cuda.DevicePtr) error {
	return q.ctx.MemsetD32Async(p, 0, 1, q.stream)
}

func (q streamQueue) sync() error { return q.stream.Synchronize() }
