package memory

import "fmt"

// Page is a handle of one page of physical memory of a VirtualMemory
// backend (a CUmemGenericAllocationHandle on the GPU); 0 is no page.
type Page uintptr

// VirtualMemory is a Backend that can also reserve address space and map
// pages of physical memory into it one page at a time: CUDA's virtual
// memory management API (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess, cuMemUnmap, cuMemRelease) on the GPU, mmap and mprotect
// on the host. A pool with PoolConfig.Expandable builds its expandable
// segments on it (pool_expand.go). Like Backend's, its methods are called
// by one goroutine at a time.
type VirtualMemory interface {
	Backend
	// Granularity is the page size in bytes, a power of two and a
	// multiple of MinBlockSize (2 MiB on NVIDIA GPUs).
	Granularity() int64
	// AddressSpace is how many bytes of address space a pool reserves
	// for one expandable segment (more for a larger request): room to grow
	// to the whole memory and beyond, since address space costs nothing.
	AddressSpace() int64
	// ReserveAddress reserves size bytes of address space (a multiple of
	// Granularity) with nothing mapped. Region.Host is the CPU's view of
	// the whole range when the memory is host-accessible; only mapped
	// pages may be touched.
	ReserveAddress(size int64) (Region, error)
	// FreeAddress gives a reservation back; nothing may be mapped in it.
	FreeAddress(r Region) error
	// CreatePage allocates one page of physical memory. When memory is
	// exhausted the error wraps ErrOutOfMemory.
	CreatePage() (Page, error)
	// ReleasePage frees a page that is mapped nowhere.
	ReleasePage(p Page) error
	// Map maps pages, in order, from addr on (a page boundary inside a
	// reservation, where nothing is mapped yet) and makes them readable
	// and writable by the tier's device. The bytes are not zeroed.
	Map(addr uintptr, pages []Page) error
	// Unmap unmaps pages, mapped in order from addr on by earlier Map
	// calls. Sync must have been called since the pages' last use was
	// queued. It is all or nothing, as Map is: on an error the pages it
	// had unmapped are mapped back (the range stays usable, as its caller
	// then takes it to be; the contents of pages mapped back may be lost),
	// and an error of that is joined to the one returned.
	Unmap(addr uintptr, pages []Page) error
	// Sync waits until no work queued so far can still touch memory that
	// is about to be unmapped (cuCtxSynchronize on the GPU; nothing on
	// the host).
	Sync() error
}

// checkGranularity checks a VirtualMemory backend's page size, which an
// expandable pool shifts and masks addresses by: a power of two and a
// multiple of MinBlockSize.
func checkGranularity(op, name string, g int64) error {
	if g <= 0 || g&(g-1) != 0 || g%MinBlockSize != 0 {
		return fmt.Errorf("memory: %s: backend %s has a page of %d bytes: want a power of two, a multiple of %d: %w",
			op, name, g, MinBlockSize, ErrInvalidArgument)
	}
	return nil
}
