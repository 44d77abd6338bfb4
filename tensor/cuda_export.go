package tensor

import (
	"fmt"

	"github.com/strata-ml/strata/cuda"
)

// Handing CUDA tensors to libraries that queue their own work (NCCL,
// through package dist): CUDAStream is the stream on which a device's ops
// run, CUDAPointer a tensor's device address. Work queued on that stream
// with that address is ordered with every op of the device exactly as one
// more op would be: after the ops queued before it, before those queued
// after; no event, no synchronization. A device has one such stream
// (every Ctx on the device queues on it), so this holds whichever Ctx
// made the tensor.
//
// Threads: the stream is safe to queue on from any goroutine, but the
// order is program order only when the ops and the foreign work are
// queued by one goroutine (the device's user, e.g. a rank's goroutine in
// data-parallel training), as it is for ops themselves.

// CUDAStream returns the stream on which dev's ops are queued (its
// Context() is the device's primary context). Errors: a nil device or one
// that is not CUDA (the CPU) wraps ErrDevice.
func CUDAStream(dev Device) (*cuda.Stream, error) {
	d, ok := dev.(*cudaDevice)
	if !ok {
		return nil, fmt.Errorf("tensor: CUDAStream: %v is not a CUDA device: %w", dev, ErrDevice)
	}
	return d.stream, nil
}

// CUDAPointer returns the device address of t's first element, for work
// queued on CUDAStream(t.Device()) that reads or writes t's Numel
// elements in place. It counts as an access for the placement scheduler
// (as every op's does), and when an overlapped optimizer update on the
// device's side stream still writes t's storage it first makes the
// device's stream wait for it (cuda_side.go). The address is valid until
// t is released or, under the placement scheduler, until the next
// migration between steps: read it again for every call.
//
// Under the hybrid placement the storage may be pooled device memory,
// managed memory or mapped pinned host memory; all three are addressable
// from the device through this address (unified addressing).
//
// Errors: a nil or released tensor (ErrArgument, ErrReleased), a tensor
// not on a CUDA device (ErrDevice), a tensor whose elements are not dense
// in row-major order, which one contiguous range of addresses cannot
// describe (ErrArgument), or a failed ordering after the side stream.
func CUDAPointer(t *Tensor) (p cuda.DevicePtr, err error) {
	const op = "CUDAPointer"
	switch {
	case t == nil:
		return 0, &OpError{Op: op, Msg: "nil tensor", Err: ErrArgument}
	case t.ref.released.Load():
		return 0, &OpError{Op: op, Msg: fmt.Sprintf("tensor %v %v (made by %s) was released", t.dtype, t.shape, t.ref.op), Err: ErrReleased}
	}
	if _, ok := t.dev.(*cudaDevice); !ok {
		return 0, &OpError{Op: op, Msg: fmt.Sprintf("tensor %v %v is on %v, not a CUDA device", t.dtype, t.shape, t.dev), Err: ErrDevice}
	}
	if !t.IsContiguous() {
		return 0, &OpError{Op: op, Msg: fmt.Sprintf("tensor %v %v with strides %v is not contiguous", t.dtype, t.shape, t.strides), Err: ErrArgument}
	}
	err = Try(func() { p = devPtr(t) })
	return p, err
}
