package memory

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/strata-ml/strata/cuda"
)

// deviceVM is the device backend of a GPU with the virtual memory
// management API: besides cuMemAlloc regions (classic segments) it
// reserves address ranges and maps pages of cuMemCreate memory into them,
// for expandable segments (pool_expand.go). NewDeviceBackend returns one
// when the device supports the API and a probe of every call works.
type deviceVM struct {
	*deviceBackend
	gran  int64
	space int64
	mu    sync.Mutex
	pages map[Page]struct{} // created and not released
	spans map[uintptr]int64 // address ranges reserved
}

// newDeviceVM probes the virtual memory API on ctx's device (reserve,
// create, map, set access, unmap, release, free one page) and returns the
// backend with it, or nil when the device, the driver or the probe says
// no.
func newDeviceVM(d *deviceBackend) *deviceVM {
	ctx := d.ctx
	if !ctx.VMMSupported() {
		return nil
	}
	g, err := ctx.MemAllocationGranularity()
	if err != nil || g <= 0 || g&(g-1) != 0 || g%MinBlockSize != 0 {
		return nil
	}
	v := &deviceVM{deviceBackend: d, gran: int64(g), pages: map[Page]struct{}{}, spans: map[uintptr]int64{}}
	total := int64(ctx.Properties().TotalMem)
	v.space = (2*total + v.gran - 1) / v.gran * v.gran
	if v.probe() != nil {
		return nil
	}
	return v
}

// probe runs one page through every call of the API.
func (v *deviceVM) probe() error {
	r, err := v.ReserveAddress(v.gran)
	if err != nil {
		return err
	}
	pg, err := v.CreatePage()
	if err != nil {
		return errors.Join(err, v.FreeAddress(r))
	}
	err = v.Map(r.Addr, []Page{pg})
	if err == nil {
		err = v.ctx.MemsetD8(cuda.DevicePtr(r.Addr), 0, int(v.gran))
		err = errors.Join(err, v.Sync(), v.Unmap(r.Addr, []Page{pg}))
	}
	return errors.Join(err, v.ReleasePage(pg), v.FreeAddress(r))
}

// largestRequest bounds one request of an expandable pool (requestBound)
// by the device's whole memory, as deviceBackend.Alloc refuses a classic
// segment past it: without it, such a request stole every free page of the
// pool and created pages until the device was full before failing.
func (v *deviceVM) largestRequest() (int64, string) {
	return int64(v.ctx.Properties().TotalMem), "device's memory"
}

func (v *deviceVM) Granularity() int64  { return v.gran }
func (v *deviceVM) AddressSpace() int64 { return v.space }

func (v *deviceVM) ReserveAddress(size int64) (Region, error) {
	if err := checkRegionSize(v.name, size); err != nil || size%v.gran != 0 {
		return Region{}, fmt.Errorf("memory: %s: cannot reserve %d bytes of address space: %w", v.name, size, ErrInvalidArgument)
	}
	p, err := v.ctx.MemAddressReserve(int(size), int(v.gran))
	if err != nil {
		return Region{}, driverAllocError(v.name, size, err)
	}
	v.mu.Lock()
	v.spans[uintptr(p)] = size
	v.mu.Unlock()
	return Region{Addr: uintptr(p), Size: size}, nil
}

func (v *deviceVM) FreeAddress(r Region) error {
	v.mu.Lock()
	size, ok := v.spans[r.Addr]
	if ok && size == r.Size {
		delete(v.spans, r.Addr)
	}
	v.mu.Unlock()
	if !ok || size != r.Size {
		return fmt.Errorf("memory: %s: free of address space it did not reserve (%#x, %d bytes): %w", v.name, r.Addr, r.Size, ErrDoubleFree)
	}
	if err := v.ctx.MemAddressFree(cuda.DevicePtr(r.Addr), int(r.Size)); err != nil {
		return fmt.Errorf("memory: %s: freeing address space at %#x: %w", v.name, r.Addr, err)
	}
	return nil
}

func (v *deviceVM) CreatePage() (Page, error) {
	h, err := v.ctx.MemCreate(int(v.gran))
	if err != nil {
		return 0, driverAllocError(v.name, v.gran, err)
	}
	pg := Page(h)
	v.mu.Lock()
	v.pages[pg] = struct{}{}
	v.mu.Unlock()
	return pg, nil
}

func (v *deviceVM) ReleasePage(pg Page) error {
	v.mu.Lock()
	_, ok := v.pages[pg]
	delete(v.pages, pg)
	v.mu.Unlock()
	if !ok {
		return fmt.Errorf("memory: %s: release of page %#x, not one of its own: %w", v.name, uintptr(pg), ErrDoubleFree)
	}
	if err := v.ctx.MemRelease(cuda.MemHandle(pg)); err != nil {
		return fmt.Errorf("memory: %s: releasing page %#x: %w", v.name, uintptr(pg), err)
	}
	return nil
}

// EnvExpandableSync=1 makes the device backend wait for all queued work
// (cuCtxSynchronize) before each map and unmap of pages: a diagnostic
// that tells a race between the pool's mapping and queued kernels from
// other causes (session 20).
const EnvExpandableSync = "STRATA_EXPANDABLE_SYNC"

var syncMapping = os.Getenv(EnvExpandableSync) == "1"

// Map maps each page (cuMemMap), then gives the device access to the
// whole range in one cuMemSetAccess. On error it unmaps what it mapped.
func (v *deviceVM) Map(addr uintptr, pages []Page) error {
	if syncMapping {
		if err := v.Sync(); err != nil {
			return err
		}
	}
	if mapped, bytes, err := v.mapPages(addr, pages); err != nil {
		return errors.Join(driverAllocError(v.name, bytes, err), v.unmapN(addr, mapped))
	}
	return nil
}

// mapPages maps pages from addr on, one cuMemMap each, and gives the
// device access to the range in one cuMemSetAccess: Map's work, and
// mapBack's. On error it returns how many pages it left mapped (all of
// them when the access failed), the bytes of the call that failed and
// the driver's error.
func (v *deviceVM) mapPages(addr uintptr, pages []Page) (mapped int, bytes int64, err error) {
	for i, pg := range pages {
		at := cuda.DevicePtr(addr + uintptr(int64(i)*v.gran))
		if err := v.ctx.MemMap(at, int(v.gran), cuda.MemHandle(pg)); err != nil {
			return i, v.gran, fmt.Errorf("mapping a page at %s: %w", at, err)
		}
	}
	n := int64(len(pages)) * v.gran
	if err := v.ctx.MemSetAccess(cuda.DevicePtr(addr), int(n)); err != nil {
		return len(pages), n, fmt.Errorf("giving the device access to %d pages at %#x: %w", len(pages), addr, err)
	}
	return len(pages), 0, nil
}

// Unmap unmaps each page's mapping (cuMemUnmap, one mapping at a time).
// When one fails, the pages unmapped before it are mapped back, with the
// device's access (VirtualMemory): the pool keeps the range as mapped,
// and a kernel reaching a page unmapped behind its back was an illegal
// address, which ends the context.
func (v *deviceVM) Unmap(addr uintptr, pages []Page) error {
	if syncMapping {
		if err := v.Sync(); err != nil {
			return err
		}
	}
	for i := range pages {
		at := cuda.DevicePtr(addr + uintptr(int64(i)*v.gran))
		if err := v.ctx.MemUnmap(at, int(v.gran)); err != nil {
			return errors.Join(fmt.Errorf("memory: %s: unmapping a page at %s: %w", v.name, at, err), v.mapBack(addr, pages[:i]))
		}
	}
	return nil
}

// mapBack maps pages again from addr on, with the device's access, after
// Unmap failed past them.
func (v *deviceVM) mapBack(addr uintptr, pages []Page) error {
	if len(pages) == 0 {
		return nil
	}
	if _, _, err := v.mapPages(addr, pages); err != nil {
		return fmt.Errorf("memory: %s: mapping %d pages back after a failed unmap: %w", v.name, len(pages), err)
	}
	return nil
}

func (v *deviceVM) unmapN(addr uintptr, n int) error {
	var errs []error
	for i := range n {
		at := cuda.DevicePtr(addr + uintptr(int64(i)*v.gran))
		if err := v.ctx.MemUnmap(at, int(v.gran)); err != nil {
			errs = append(errs, fmt.Errorf("memory: %s: unmapping a page at %s: %w", v.name, at, err))
		}
	}
	return errors.Join(errs...)
}

// Sync waits for all work on the device (cuCtxSynchronize): pages about
// to be unmapped may be used by work queued on any stream.
func (v *deviceVM) Sync() error { return v.ctx.Synchronize() }
