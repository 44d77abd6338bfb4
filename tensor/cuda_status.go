package tensor

import (
	"fmt"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// cudaStatusWords mirrors struct Status of kernels/common.cuh: the block of
// mapped pinned host memory through which kernels report bad data and
// hand back scalar results without a device-to-host copy.
type cudaStatusWords struct {
	code   uint32
	_      uint32
	index  int64
	value  int64
	limit  int64
	scalar float64
	count  int64
}

// Status codes, as in kernels/common.cuh.
const (
	statusGatherID         = 1
	statusScatterID        = 2
	statusCETarget         = 3
	statusCEBackwardTarget = 4
)

const (
	cudaStatusBytes = 256 // the mapped block; cudaStatusWords sits at its start
	cudaClaimBytes  = 256 // the device-memory claim word's allocation
)

// The words must fit the block (a negative array length does not compile).
var _ [cudaStatusBytes - unsafe.Sizeof(cudaStatusWords{})]byte

// cudaStatus is a device's error-word machinery (see kernels/common.cuh):
// words in mapped pinned host memory that the host reads after a
// synchronization, and a claim word in device memory that elects the one
// kernel thread allowed to write a report.
type cudaStatus struct {
	host  unsafe.Pointer   // the pinned block (host address)
	words *cudaStatusWords // the same, typed
	dev   cuda.DevicePtr   // its device alias, handed to kernels
	claim cuda.DevicePtr   // device memory, zeroed
}

func newCUDAStatus(ctx *cuda.Context) (*cudaStatus, error) {
	host, _, err := ctx.MemHostAlloc(cudaStatusBytes, cuda.HostAllocDeviceMap)
	if err != nil {
		return nil, fmt.Errorf("allocating the mapped status block: %w", err)
	}
	s := &cudaStatus{host: host, words: (*cudaStatusWords)(host)}
	*s.words = cudaStatusWords{}
	if s.dev, err = ctx.MemHostGetDevicePointer(host); err == nil {
		if s.claim, err = ctx.MemAlloc(cudaClaimBytes); err == nil {
			// A synchronous memset of device memory may still be running
			// when it returns, on the legacy stream, which the device's
			// non-blocking streams do not wait for: wait for it here.
			if err = ctx.MemsetD32(s.claim, 0, cudaClaimBytes/4); err == nil {
				if err = ctx.Synchronize(); err == nil {
					return s, nil
				}
			}
			_ = ctx.MemFree(s.claim)
		}
	}
	_ = ctx.MemFreeHost(host)
	return nil, fmt.Errorf("setting up the status block: %w", err)
}

// take returns the pending report as an *OpError and clears it, or nil.
// The stream must be idle (just synchronized) and d.mu held.
func (s *cudaStatus) take(d *cudaDevice) error {
	w := s.words
	if w.code == 0 {
		return nil
	}
	var op, msg string
	switch w.code {
	case statusGatherID:
		op, msg = "Embedding", fmt.Sprintf("ids[%d] = %d, table has %d rows", w.index, w.value, w.limit)
	case statusScatterID:
		op, msg = "EmbeddingBackward", fmt.Sprintf("ids[%d] = %d, table has %d rows", w.index, w.value, w.limit)
	case statusCETarget:
		op, msg = "CrossEntropy", fmt.Sprintf("target of row %d is %d, want a class in [0, %d) or the ignore index", w.index, w.value, w.limit)
	case statusCEBackwardTarget:
		op, msg = "CrossEntropyBackward", fmt.Sprintf("target of row %d is %d, want a class in [0, %d) or the ignore index", w.index, w.value, w.limit)
	default:
		op, msg = "Synchronize", fmt.Sprintf("unknown status code %d from a kernel", w.code)
	}
	*w = cudaStatusWords{}
	err := d.q.clearWord(s.claim)
	oe := &OpError{Op: op, Msg: msg + fmt.Sprintf(" (found by a kernel on %v, reported at the next synchronization)", d), Err: ErrArgument}
	if err != nil {
		oe.Msg += fmt.Sprintf("; clearing the report failed: %v", err)
	}
	return oe
}

// args appends the claim and status pointers, the last two parameters of
// every validating kernel.
func (s *cudaStatus) args(a *cuda.Args) { a.Ptr(s.claim).Ptr(s.dev) }
