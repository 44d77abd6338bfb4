package memory

import (
	"fmt"

	"github.com/strata-ml/strata/cuda"
)

// managedBackend is CUDA unified memory: cuMemAllocManaged, attached
// globally. Under unified addressing the device pointer is also a valid
// host pointer, so every region has a host view of the same bytes; pages
// migrate to whichever processor touches them, as the advice steers.
type managedBackend struct {
	ctx  *cuda.Context
	name string
	live liveRegions
	// streams resolves the stream of a prefetch; nil until a CUDA manager
	// wires its CUDAStreams in, and then only the default stream (0) works.
	streams *CUDAStreams
}

// NewManagedBackend returns the TierManaged backend of ctx's device. It is
// an Adviser: pools over it apply each allocation's Advice to its pages.
//
// Oversubscribed managed memory thrashes, and can hang the GPU, so the
// backend refuses, with an error wrapping ErrOutOfMemory and without asking
// the driver, any request larger than the device's free memory (by
// cuMemGetInfo) less a headroom of max(512 MiB, 1/64 of the device), and
// any request that would take its own live bytes beyond the device's total
// memory less that headroom; when cuMemGetInfo fails it refuses too.
// Device memory allocated after managed memory can still oversubscribe it
// once all of it is prefetched; cap the managed pool with
// Config.Limits[TierManaged] where that matters. It panics if ctx is nil
// (a programming error).
func NewManagedBackend(ctx *cuda.Context) Backend {
	if ctx == nil {
		panic("memory: NewManagedBackend: nil *cuda.Context")
	}
	return &managedBackend{ctx: ctx, name: ctx.Device().String() + " managed"}
}

func (m *managedBackend) Name() string { return m.name }
func (m *managedBackend) Tier() Tier   { return TierManaged }

func (m *managedBackend) Alloc(size int64) (Region, error) {
	if err := checkRegionSize(m.name, size); err != nil {
		return Region{}, err
	}
	// Without the device's free memory the rule cannot be applied, and
	// guessing risks the hang it exists to prevent: refuse.
	free, total, err := m.ctx.MemGetInfo()
	if err != nil {
		return Region{}, fmt.Errorf("memory: %s: refusing %s of managed memory: the device's free memory is unknown: %w",
			m.name, FormatBytes(size), err)
	}
	if err := managedFits(size, m.live.total(), int64(free), int64(total)); err != nil {
		return Region{}, fmt.Errorf("memory: %s: %w", m.name, err)
	}
	p, err := m.ctx.MemAllocManaged(int(size))
	if err != nil {
		return Region{}, driverAllocError(m.name, size, err)
	}
	r := Region{Addr: uintptr(p), Host: cuda.UnsafeHostView(p, int(size)), Size: size}
	m.live.add(r.Addr, size, nil)
	return r, nil
}

func (m *managedBackend) Free(r Region) error {
	return m.live.memFree(m.ctx, m.name, r)
}

// Info reports the device's free and total memory: where managed pages
// want to live.
func (m *managedBackend) Info() (free, total int64, ok bool) { return deviceInfo(m.ctx) }

// ManagedHeadroom is the device memory the managed backend leaves free on
// a device of total bytes: max(512 MiB, total/64).
func ManagedHeadroom(total int64) int64 { return max(512<<20, total/64) }

// managedFits applies the managed backend's rule to a request of size
// bytes, with live bytes of managed memory already out, on a device with
// free of total bytes free. The error wraps ErrOutOfMemory.
func managedFits(size, live, free, total int64) error {
	room := ManagedHeadroom(total)
	if size > free-room {
		return fmt.Errorf("refusing %s of managed memory: the device has %s free and %s is kept as headroom "+
			"(oversubscribed managed memory thrashes and can hang the GPU): %w",
			FormatBytes(size), FormatBytes(free), FormatBytes(room), ErrOutOfMemory)
	}
	if live+size > total-room {
		return fmt.Errorf("refusing %s of managed memory: %s is already out, and all of it must fit the device's %s less %s of headroom "+
			"(oversubscribed managed memory thrashes and can hang the GPU): %w",
			FormatBytes(size), FormatBytes(live), FormatBytes(total), FormatBytes(room), ErrOutOfMemory)
	}
	return nil
}
