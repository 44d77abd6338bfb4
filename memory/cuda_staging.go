package memory

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/cuda"
)

// stagingBackend is mapped page-locked host memory: cuMemHostAlloc with
// DEVICEMAP and PORTABLE. Kernels read and write it across the bus through
// its device alias, with no copy; copies from and to it run at full bus
// speed, asynchronously.
type stagingBackend struct {
	ctx   *cuda.Context
	name  string
	flags cuda.HostAllocFlags
	live  liveRegions
}

// NewStagingBackend returns the TierStaging backend of ctx's device:
// regions whose Addr is the device alias (cuMemHostGetDevicePointer; the
// host address itself under unified addressing, which every 64-bit CUDA
// platform has) and whose Host is the pages. writeCombined adds
// CU_MEMHOSTALLOC_WRITECOMBINED: faster for the host to fill and for the
// device to read over PCIe, but very slow for the host to read; use it only
// for buffers the host writes and never reads. Page-locked memory comes out
// of host RAM, so Info reports the host's. A request larger than the
// host's RAM fails with ErrOutOfMemory without asking the driver. It panics
// if ctx is nil (a programming error).
func NewStagingBackend(ctx *cuda.Context, writeCombined bool) Backend {
	if ctx == nil {
		panic("memory: NewStagingBackend: nil *cuda.Context")
	}
	b := &stagingBackend{ctx: ctx, name: ctx.Device().String() + " staging", flags: cuda.HostAllocDeviceMap | cuda.HostAllocPortable}
	if writeCombined {
		b.flags |= cuda.HostAllocWriteCombined
		b.name += "(write-combined)"
	}
	return b
}

func (b *stagingBackend) Name() string { return b.name }
func (b *stagingBackend) Tier() Tier   { return TierStaging }

func (b *stagingBackend) Alloc(size int64) (Region, error) {
	if err := checkRegionSize(b.name, size); err != nil {
		return Region{}, err
	}
	if _, total, ok := hostMemInfo(); ok && size > total {
		return Region{}, fmt.Errorf("memory: %s: cannot allocate %s of page-locked memory: the host has %s of RAM: %w",
			b.name, FormatBytes(size), FormatBytes(total), ErrOutOfMemory)
	}
	return allocMapped(b.ctx, &b.live, b.name, size, b.flags)
}

func (b *stagingBackend) Free(r Region) error { return freeMapped(b.ctx, &b.live, b.name, r) }

// allocMapped allocates size bytes of mapped page-locked host memory with
// flags (DEVICEMAP among them) for backend name and records the region in
// live: its Addr is the device alias, its Host the pages.
func allocMapped(ctx *cuda.Context, live *liveRegions, name string, size int64, flags cuda.HostAllocFlags) (Region, error) {
	hp, host, err := ctx.MemHostAlloc(int(size), flags)
	if err != nil {
		return Region{}, driverAllocError(name, size, err)
	}
	dp, err := ctx.MemHostGetDevicePointer(hp)
	if err != nil {
		ferr := ctx.MemFreeHost(hp)
		return Region{}, fmt.Errorf("memory: %s: the device alias of %s of mapped memory: %w", name, FormatBytes(size), errors.Join(err, ferr))
	}
	r := Region{Addr: uintptr(dp), Host: host, Size: size}
	live.add(r.Addr, size, hp)
	return r, nil
}

// freeMapped frees a region of allocMapped.
func freeMapped(ctx *cuda.Context, live *liveRegions, name string, r Region) error {
	hp, err := live.remove(name, r)
	if err != nil {
		return err
	}
	if err := ctx.MemFreeHost(hp); err != nil {
		return fmt.Errorf("memory: %s: freeing %s at %#x: %w", name, FormatBytes(r.Size), r.Addr, err)
	}
	return nil
}

// Info reports the host's available and total RAM, which page-locked
// memory comes out of.
func (b *stagingBackend) Info() (free, total int64, ok bool) { return hostMemInfo() }
