package tensor

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// uploadStager queues uploads into device memory mapped through the
// virtual memory API (expandable segments) on a stream, by way of
// page-locked host buffers. There, cuMemcpyHtoDAsync from pageable memory
// over a few MiB failed now and then with CUDA_ERROR_INVALID_VALUE on the
// H200 (driver 580; cuda's TestGPUVMMCopies), where copies from
// page-locked memory never did; and the synchronous cuMemcpyHtoD used
// until session 21 runs on the legacy default stream, which the device's
// non-blocking streams do not wait for, and returns before pageable bytes
// have landed: the kernels queued after it read the block's old bytes
// (session 20's wrong training results on expandable memory).
//
// The host bytes are copied into one of stageBufs page-locked buffers
// (stageChunk bytes at most each; a larger upload goes chunk by chunk,
// alternating buffers) and copied from there on the stream, so the upload
// is ordered with the kernels around it like any queued copy and the
// caller may reuse its bytes at once. An event recorded after each chunk's
// copy guards the buffer: it is written again only once that copy has
// run. Buffers grow to the largest chunk seen, up to stageChunk.
type uploadStager struct {
	mu   sync.Mutex
	bufs [stageBufs]stageBuf
	next int
}

type stageBuf struct {
	host unsafe.Pointer // nil until first use
	b    []byte         // the page-locked bytes
	done *cuda.Event    // recorded after the last copy out of b
	busy bool           // done was recorded and not yet waited for
}

const (
	stageBufs  = 2
	stageChunk = 4 << 20
)

// upload copies src to dst, ordered on stream s of ctx.
func (u *uploadStager) upload(ctx *cuda.Context, s *cuda.Stream, dst cuda.DevicePtr, src []byte) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for off := 0; off < len(src); {
		n := min(stageChunk, len(src)-off)
		b, err := u.take(ctx, n)
		if err != nil {
			return err
		}
		copy(b.b, src[off:off+n])
		if err := ctx.MemcpyHtoDAsync(dst+cuda.DevicePtr(off), b.b[:n], s); err != nil {
			return err
		}
		if err := b.done.Record(s); err != nil {
			// Unknown whether the copy still reads b: wait for everything.
			return errors.Join(err, s.Synchronize())
		}
		b.busy = true
		off += n
	}
	return nil
}

// take returns the next buffer, at least n bytes long, once its last copy
// has run.
func (u *uploadStager) take(ctx *cuda.Context, n int) (*stageBuf, error) {
	b := &u.bufs[u.next]
	u.next = (u.next + 1) % stageBufs
	if b.busy {
		if err := b.done.Synchronize(); err != nil {
			return nil, err
		}
		b.busy = false
	}
	if b.done == nil {
		e, err := ctx.NewEvent(cuda.EventDisableTiming)
		if err != nil {
			return nil, err
		}
		b.done = e
	}
	if len(b.b) < n {
		size := max(n, 64<<10)
		if size > stageChunk/2 {
			size = stageChunk
		}
		if b.host != nil {
			if err := ctx.MemFreeHost(b.host); err != nil {
				return nil, err
			}
			b.host, b.b = nil, nil
		}
		p, bytes, err := ctx.MemHostAlloc(size, 0)
		if err != nil {
			return nil, err
		}
		b.host, b.b = p, bytes
	}
	return b, nil
}

// free waits for the buffers' copies and releases them.
func (u *uploadStager) free(ctx *cuda.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for i := range u.bufs {
		b := &u.bufs[i]
		if b.busy {
			errs = append(errs, b.done.Synchronize())
		}
		if b.host != nil {
			errs = append(errs, ctx.MemFreeHost(b.host))
		}
		if b.done != nil {
			errs = append(errs, b.done.Destroy())
		}
		*b = stageBuf{}
	}
	return errors.Join(errs...)
}
