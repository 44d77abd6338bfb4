package memory

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// deviceBackend is plain device memory: cuMemAlloc and cuMemFree. The CPU
// cannot address it, so its regions have no host view.
type deviceBackend struct {
	ctx  *cuda.Context
	name string
	live liveRegions
}

// NewDeviceBackend returns the TierDevice backend of ctx's device. A
// request the device cannot hold, by the driver's answer or because it is
// larger than the device's whole memory, fails with an error wrapping
// ErrOutOfMemory and, when the driver was asked, its *cuda.Error. When the
// device has the virtual memory management API (and one page goes through
// every call of it) the backend is also a VirtualMemory, for expandable
// segments (cuda_vmm.go), unless STRATA_EXPANDABLE_SEGMENTS=0 asks for
// classic cuMemAlloc segments. It panics if ctx is nil (a programming
// error).
func NewDeviceBackend(ctx *cuda.Context) Backend {
	if ctx == nil {
		panic("memory: NewDeviceBackend: nil *cuda.Context")
	}
	d := &deviceBackend{ctx: ctx, name: ctx.Device().String() + " device"}
	if deviceVMMWanted() {
		if v := newDeviceVM(d); v != nil {
			return v
		}
	}
	return d
}

// deviceVMMWanted reports whether STRATA_EXPANDABLE_SEGMENTS leaves
// expandable segments on for the device: unless it says 0 or false (an
// unknown value is Config.Validate's error). They were opt-in there until
// session 24: the H200's copy engines refused copies into mapped ranges
// now and then (doc.go), which package tensor avoids since session 21, and
// CUDA graphs could not be captured on them, which they can since session
// 24; on the H200 they then reserved 1.006-1.044 of the allocated peak in
// training where classic segments reserved 1.041-1.310, at the same speed
// with a graph (bench/results/hybrid-2026-12-04-s24.md). Eager steps run
// 0.99-1.00x of classic segments without checkpointing; with it they moved
// pages every step until the pool earned slack (pool_expand_churn.go),
// then 0.975-0.989x (bench/results/hybrid-2026-12-04-s25.md).
func deviceVMMWanted() bool {
	on, err := SegmentsDefault.expandable()
	return on || err != nil
}

func (d *deviceBackend) Name() string { return d.name }
func (d *deviceBackend) Tier() Tier   { return TierDevice }

func (d *deviceBackend) Alloc(size int64) (Region, error) {
	if err := checkRegionSize(d.name, size); err != nil {
		return Region{}, err
	}
	if total := int64(d.ctx.Properties().TotalMem); size > total {
		return Region{}, fmt.Errorf("memory: %s: cannot allocate %s: the device has %s in all: %w",
			d.name, FormatBytes(size), FormatBytes(total), ErrOutOfMemory)
	}
	p, err := d.ctx.MemAlloc(int(size))
	if err != nil {
		return Region{}, driverAllocError(d.name, size, err)
	}
	r := Region{Addr: uintptr(p), Size: size}
	d.live.add(r.Addr, size, nil)
	return r, nil
}

func (d *deviceBackend) Free(r Region) error {
	return d.live.memFree(d.ctx, d.name, r)
}

func (d *deviceBackend) Info() (free, total int64, ok bool) { return deviceInfo(d.ctx) }

// deviceInfo is cuMemGetInfo: the device's free and total bytes, other
// processes' use included.
func deviceInfo(ctx *cuda.Context) (free, total int64, ok bool) {
	f, t, err := ctx.MemGetInfo()
	if err != nil {
		return 0, 0, false
	}
	return int64(f), int64(t), true
}

// checkRegionSize refuses sizes no backend can serve: zero, negative, or
// beyond the platform's int.
func checkRegionSize(name string, size int64) error {
	if size <= 0 || int64(int(size)) != size {
		return fmt.Errorf("memory: %s: cannot allocate %d bytes: %w", name, size, ErrInvalidArgument)
	}
	return nil
}

// driverAllocError wraps a failed CUDA allocation of size bytes; the
// driver's out of memory becomes ours too.
func driverAllocError(name string, size int64, err error) error {
	if errors.Is(err, cuda.ErrOutOfMemory) {
		return fmt.Errorf("memory: %s: allocating %s: %w: %w", name, FormatBytes(size), ErrOutOfMemory, err)
	}
	return fmt.Errorf("memory: %s: allocating %s: %w", name, FormatBytes(size), err)
}

// liveRegions is the set of regions a CUDA backend handed out and has not
// taken back, so that a second free is an error instead of a driver fault
// or, worse, the free of someone else's memory at a reused address. For
// page-locked memory it also keeps the host pointer to free.
type liveRegions struct {
	mu    sync.Mutex
	m     map[uintptr]liveRegion
	bytes int64
}

type liveRegion struct {
	size int64
	host unsafe.Pointer // page-locked memory's host pointer, else nil
}

func (l *liveRegions) add(addr uintptr, size int64, host unsafe.Pointer) {
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[uintptr]liveRegion)
	}
	l.m[addr] = liveRegion{size: size, host: host}
	l.bytes += size
	l.mu.Unlock()
}

// remove takes r out of the set and returns its host pointer, or reports
// that r is not in it.
func (l *liveRegions) remove(name string, r Region) (unsafe.Pointer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr, ok := l.m[r.Addr]
	if !ok || lr.size != r.Size {
		return nil, fmt.Errorf("memory: %s: free of a region that is not live (addr %#x, %d bytes): %w", name, r.Addr, r.Size, ErrDoubleFree)
	}
	delete(l.m, r.Addr)
	l.bytes -= r.Size
	return lr.host, nil
}

// memFree takes r out of the set and gives it back with cuMemFree: the
// Free of the backends whose regions come from cuMemAlloc or
// cuMemAllocManaged.
func (l *liveRegions) memFree(ctx *cuda.Context, name string, r Region) error {
	if _, err := l.remove(name, r); err != nil {
		return err
	}
	if err := ctx.MemFree(cuda.DevicePtr(r.Addr)); err != nil {
		return fmt.Errorf("memory: %s: freeing %s at %#x: %w", name, FormatBytes(r.Size), r.Addr, err)
	}
	return nil
}

// has reports whether r is live.
func (l *liveRegions) has(r Region) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lr, ok := l.m[r.Addr]
	return ok && lr.size == r.Size
}

// total returns the bytes live.
func (l *liveRegions) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}
