package tensor

import (
	"errors"
	"slices"
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
// So the host bytes are copied into a mapped page-locked buffer
// (stageChunk bytes at most; a larger upload goes chunk by chunk) and from
// there by the copy kernel, reading the buffer's device alias, on the
// stream: the upload is ordered with the kernels around it like any queued
// work, and the caller may reuse its bytes at once. An event recorded
// after each chunk's kernel guards the buffer: it is written again only
// once that kernel has run. The buffers form a ring in the order of their
// use; an upload takes the oldest when its kernel has run (a query, no
// wait), else a new buffer, up to stageMaxBufs, and only then waits. With
// two buffers and a wait for the older one, a step's third upload (its
// batch, then the argument tables of the gradient norm and the update)
// waited for the device to reach the step's first, which holds the host
// back from queueing ahead of the device. (It was a suspect for eager
// training of the char model running 4-9% slower on expandable memory
// than on classic segments on the H200; the ring did not change that:
// bench/results/hybrid-2026-12-04-s24.md, calls 6 and 9.) Buffers grow to
// the largest chunk they carried, up to stageChunk. Sizes or addresses the
// copy kernel cannot take (odd ones: no tensor has them; the dtypes are 2
// bytes or more) fall back to the synchronous copy followed by a
// synchronisation of the context.
type uploadStager struct {
	d    *cudaDevice
	mu   sync.Mutex // guards the rest
	args *cuda.Args
	bufs []*stageBuf // the ring: bufs[next] is the least recently used
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
	stageMaxBufs = 8
	stageChunk   = 4 << 20
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

// take returns a buffer of at least n bytes whose last copy has run: the
// least recently used one when its copy has run, else a new one (up to
// stageMaxBufs), else the least recently used once its copy has run.
func (u *uploadStager) take(n int) (*stageBuf, error) {
	if k := len(u.bufs); k > 0 {
		b := u.bufs[u.next]
		ready := !b.busy
		if !ready {
			done, err := b.done.Query()
			if err != nil {
				return nil, err
			}
			ready = done
		}
		if !ready && k >= stageMaxBufs {
			if err := b.done.Synchronize(); err != nil {
				return nil, err
			}
			ready = true
		}
		if ready {
			b.busy = false
			u.next = (u.next + 1) % k
			return b, u.size(b, n)
		}
	}
	// A new buffer goes in before the least recently used one, which stays
	// next.
	b := &stageBuf{}
	u.bufs = slices.Insert(u.bufs, u.next, b)
	u.next = (u.next + 1) % len(u.bufs)
	return b, u.size(b, n)
}

// size makes b's event and grows b to at least n bytes (b is not busy).
func (u *uploadStager) size(b *stageBuf, n int) error {
	ctx := u.d.ctx
	if b.done == nil {
		e, err := ctx.NewEvent(cuda.EventDisableTiming)
		if err != nil {
			return err
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
				return err
			}
			b.host, b.b = nil, nil
		}
		p, bytes, err := ctx.MemHostAlloc(size, cuda.HostAllocDeviceMap)
		if err != nil {
			return err
		}
		dev, err := ctx.MemHostGetDevicePointer(p)
		if err != nil {
			return errors.Join(err, ctx.MemFreeHost(p))
		}
		b.host, b.b, b.dev = p, bytes, dev
	}
	return nil
}

// free waits for the buffers' copies and releases them.
func (u *uploadStager) free() error {
	ctx := u.d.ctx
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for _, b := range u.bufs {
		if b.busy {
			errs = append(errs, b.done.Synchronize())
		}
		if b.host != nil {
			errs = append(errs, ctx.MemFreeHost(b.host))
		}
		if b.done != nil {
			errs = append(errs, b.done.Destroy())
		}
	}
	u.bufs, u.next = nil, 0
	if u.args != nil {
		u.args.Free()
		u.args = nil
	}
	return errors.Join(errs...)
}
