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
	// stage is set when device memory is mapped through the virtual
	// memory API (expandable segments). There, cuMemcpyHtoDAsync and
	// cuMemcpyDtoHAsync of pageable memory over a few MiB failed now and
	// then with CUDA_ERROR_INVALID_VALUE on the H200 (driver 580; cuda's
	// TestGPUVMMCopies), where synchronous copies never did (page-locked
	// ones failed too in the tensor layer: session 21). Downloads then
	// drain the stream and run cuMemcpyDtoH, which returns once the bytes
	// have arrived; uploads go through stage: into mapped page-locked
	// memory and from there by kernel on the stream (uploadStager says why
	// not the synchronous cuMemcpyHtoD).
	stage *uploadStager
}

// newStreamQueue is d's queue of stream s; with device memory mapped
// through the virtual memory API (d.vmm) it stages uploads and makes
// downloads synchronous.
func newStreamQueue(d *cudaDevice, s *cuda.Stream) streamQueue {
	q := streamQueue{ctx: d.ctx, stream: s}
	if d.vmm {
		q.stage = &uploadStager{d: d}
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
		return q.stage.upload(q.stream, dst, src)
	}
	return q.ctx.MemcpyHtoDAsync(dst, src, q.stream)
}

func (q streamQueue) copyDtoH(dst []byte, src cuda.DevicePtr) error {
	if q.stage != nil {
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
