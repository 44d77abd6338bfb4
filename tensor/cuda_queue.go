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
	// syncPageable is set when device memory is mapped through the
	// virtual memory API (expandable segments). There, cuMemcpyHtoDAsync
	// and cuMemcpyDtoHAsync of pageable memory over a few MiB failed now
	// and then with CUDA_ERROR_INVALID_VALUE on the H200 (driver 580;
	// cuda's TestGPUVMMCopies), where synchronous and page-locked copies
	// never did. Downloads drain the stream, then run cuMemcpyDtoH, which
	// returns once the bytes have arrived. Uploads go through stage, a
	// page-locked staging ring, as asynchronous copies on the stream: the
	// synchronous cuMemcpyHtoD used before runs on the legacy default
	// stream, which our streams (CU_STREAM_NON_BLOCKING) do not wait for,
	// and from pageable memory it returns once the bytes are staged, before
	// they reach the device (CUDA's "API synchronization behavior"), so the
	// kernels queued next read the destination before the copy landed:
	// session 20's wrong training results on expandable memory
	// (bench/results/expandable-gpu-2026-12-03-s20.md).
	syncPageable bool
	stage        *uploadStager // with syncPageable
}

// newStreamQueue is the queue of stream s; vmm: device memory is mapped
// through the virtual memory API (syncPageable, staged uploads).
func newStreamQueue(ctx *cuda.Context, s *cuda.Stream, vmm bool) streamQueue {
	q := streamQueue{ctx: ctx, stream: s, syncPageable: vmm}
	if vmm {
		q.stage = &uploadStager{}
	}
	return q
}

func (q streamQueue) launch(fn *cuda.Function, grid, block [3]uint32, a *cuda.Args) error {
	return q.ctx.LaunchKernelArgs(fn, grid, block, 0, q.stream, a)
}

func (q streamQueue) copyDtoD(dst, src cuda.DevicePtr, n int) error {
	return q.ctx.MemcpyDtoDAsync(dst, src, n, q.stream)
}

func (q streamQueue) copyHtoD(dst cuda.DevicePtr, src []byte) error {
	if q.stage != nil {
		return q.stage.upload(q.ctx, q.stream, dst, src)
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
