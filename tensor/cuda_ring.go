package tensor

import (
	"sync"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// pinnedRing stages small host-to-device copies through page-locked
// memory, so that they stay asynchronous where copies from pageable
// memory cannot: with device memory mapped through the virtual memory API
// (expandable segments) streamQueue drains the stream before each
// pageable copy (see syncPageable), and a training step's argument tables
// and input batch made every step wait for the device, which cost what
// the expandable segments' extra room saved (session 11). A copy of up to
// ringSlotBytes takes the next of ringSlots slots: the host waits for the
// slot's previous copy (its event; with this many slots it has long run),
// copies the bytes in, queues cuMemcpyHtoDAsync from the slot and records
// the slot's event behind it. The main and side streams share the ring.
type pinnedRing struct {
	mu   sync.Mutex
	ctx  *cuda.Context
	host unsafe.Pointer
	buf  []byte
	ev   [ringSlots]*cuda.Event
	used [ringSlots]bool
	next int
}

const (
	ringSlots     = 16
	ringSlotBytes = 1 << 20
)

// newPinnedRing allocates the ring, or returns nil when it cannot (the
// copies then stay synchronous).
func newPinnedRing(ctx *cuda.Context) *pinnedRing {
	host, buf, err := ctx.MemHostAlloc(ringSlots*ringSlotBytes, 0)
	if err != nil {
		return nil
	}
	r := &pinnedRing{ctx: ctx, host: host, buf: buf}
	for i := range r.ev {
		if r.ev[i], err = ctx.NewEvent(cuda.EventDisableTiming); err != nil {
			for _, e := range r.ev[:i] {
				_ = e.Destroy()
			}
			_ = ctx.MemFreeHost(host)
			return nil
		}
	}
	return r
}

// copyHtoD queues the copy of src to dst on stream s through a slot and
// reports whether it did (false: src is larger than a slot).
func (r *pinnedRing) copyHtoD(s *cuda.Stream, dst cuda.DevicePtr, src []byte) (bool, error) {
	if r == nil || len(src) > ringSlotBytes {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.next
	r.next = (i + 1) % ringSlots
	if r.used[i] {
		if err := r.ev[i].Synchronize(); err != nil {
			return true, err
		}
	}
	slot := r.buf[i*ringSlotBytes : i*ringSlotBytes+len(src)]
	copy(slot, src)
	if err := r.ctx.MemcpyHtoDAsync(dst, slot, s); err != nil {
		return true, err
	}
	r.used[i] = true
	return true, r.ev[i].Record(s)
}
