package tensor

import (
	"errors"
	"sync"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// uploadStager queues uploads into device memory mapped through the
// virtual memory API (expandable segments) on a stream, without the copy
// engines. On the H200 (driver 580) they refused now and then
// (CUDA_ERROR_INVALID_VALUE) copies into such ranges: cuMemcpyHtoDAsync
// from pageable memory (session 17) and from page-locked memory alike
// (session 21, call 1: 2.4 and 4 MiB uploads of the tensor suite and of
// training), and device-to-device copies (copyDevice). The synchronous
// cuMemcpyHtoD used until session 20 did not fail, but it runs on the
// legacy default stream, which the device's non-blocking streams do not
// wait for, and returns before pageable bytes have landed: the kernels
// queued after it read the block's old bytes (session 20's wrong
// training results on expandable memory).
//
// So the host bytes are copied into one of stageBufs mapped page-locked
// buffers (stageChunk bytes at most each; a larger upload goes chunk by
// chunk, alternating buffers) and from there by the copy kernel, reading
// the buffer's device alias, on the stream: the upload is ordered with the
// kernels around it like any queued work, and the caller may reuse its
// bytes at once. An event recorded after each chunk's kernel guards the
// buffer: it is written again only once that kernel has run. Buffers grow
// to the largest chunk seen, up to stageChunk. Sizes or addresses the copy
// kernel cannot take (odd ones: no tensor has them; the dtypes are 2 bytes
// or more) fall back to the synchronous copy followed by a
// synchronisation of the context.
type uploadStager struct {
	d    *cudaDevice
	mu   sync.Mutex // guards the rest
	args *cuda.Args
	bufs [stageBufs]stageBuf
	next int
}

type stageBuf struct {
	host unsafe.Pointer // nil until first use
	b    []byte         // the page-locked bytes
	dev  cuda.DevicePtr // their device alias
	done *cuda.Event    // recorded after the last copy out of b
	busy bool           // done was recorded and not yet waited for
}

const (
	stageBufs  = 2
	stageChunk = 4 << 20
)

// upload copies src to dst, ordered on stream s.
func (u *uploadStager) upload(s *cuda.Stream, dst cuda.DevicePtr, src []byte) error {
	ctx := u.d.ctx
	if _, _, ok := copyWords(len(src), uintptr(dst), 0); !ok {
		if len(src) == 0 {
			return nil
		}
		return errors.Join(s.Synchronize(), ctx.MemcpyHtoD(dst, src), ctx.Synchronize())
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.args == nil {
		a, err := cuda.NewArgs()
		if err != nil {
			return err
		}
		u.args = a
	}
	for off := 0; off < len(src); {
		n := min(stageChunk, len(src)-off)
		b, err := u.take(n)
		if err != nil {
			return err
		}
		copy(b.b, src[off:off+n])
		kb, w, _ := copyWords(n, uintptr(dst)+uintptr(off), uintptr(b.dev))
		a := u.args.Reset()
		a.Ptr(dst + cuda.DevicePtr(off)).Ptr(b.dev).Int64(1).Int64(int64(w)).Int64(int64(w)).Int64(int64(w))
		cudaLaunches.Add(1)
		if err := ctx.LaunchKernelArgs(u.d.k.copy2D[kb], grid1(w), block1, 0, s, a); err != nil {
			return err
		}
		if err := b.done.Record(s); err != nil {
			// Unknown whether the kernel still reads b: wait for everything.
			return errors.Join(err, s.Synchronize())
		}
		b.busy = true
		off += n
	}
	return nil
}

// take returns the next buffer, at least n bytes long, once its last copy
// has run.
func (u *uploadStager) take(n int) (*stageBuf, error) {
	ctx := u.d.ctx
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
		p, bytes, err := ctx.MemHostAlloc(size, cuda.HostAllocDeviceMap)
		if err != nil {
			return nil, err
		}
		dev, err := ctx.MemHostGetDevicePointer(p)
		if err != nil {
			return nil, errors.Join(err, ctx.MemFreeHost(p))
		}
		b.host, b.b, b.dev = p, bytes, dev
	}
	return b, nil
}

// free waits for the buffers' copies and releases them.
func (u *uploadStager) free() error {
	ctx := u.d.ctx
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
	if u.args != nil {
		u.args.Free()
		u.args = nil
	}
	return errors.Join(errs...)
}
