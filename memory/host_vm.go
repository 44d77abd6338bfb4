//go:build unix

package memory

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostPageSize is the page of the host backend's virtual memory: the GPU's
// granularity, so that expandable segments over host memory (CI, the
// trace replay on the CPU) behave as on a GPU.
const HostPageSize = 2 << 20

// hostAddressSpace is the address space of one expandable host segment:
// far more than this machine's memory, and free (PROT_NONE pages with
// MAP_NORESERVE are neither backed nor charged).
const hostAddressSpace = 64 << 30

// hostVM is the host backend with virtual memory: a reservation is an
// anonymous PROT_NONE mapping; mapping pages makes them readable and
// writable; unmapping makes them inaccessible again. On Linux a page is a
// range of a memory file (host_vm_file_linux.go), so a page mapped at two
// places (lent by an expandable segment, pool_expand.go) is one memory at
// both, as on a GPU; elsewhere a page is a token, each place backed by
// anonymous memory of its own (given back with MADV_DONTNEED), which is
// all the pool's accounting needs but hides two live mappings of a page.
type hostVM struct {
	hostBackend
	reservations map[uintptr]reservation
	nextPage     Page
	pages        map[Page]hostPage // created pages
	file         pageFile
	// largest is largestRequest's bound, read with the first request,
	// and what it is.
	largest     int64
	largestWhat string
	largestOnce sync.Once
	// unmapFault, set by tests, fails Unmap's i-th page with its error
	// instead of unmapping it (nil: never).
	unmapFault func(i int) error
}

// reservation is reserved address space: b, page-aligned, within the
// whole mapping (one page longer, so that an aligned start exists on
// kernels that do not align large anonymous mappings themselves).
type reservation struct{ whole, b []byte }

// hostPage is a created page: the number of places it is mapped at, and
// its offset in the page file (-1: anonymous memory at each place).
type hostPage struct {
	mapped int
	off    int64
}

func newHostBackend(tier Tier, name string) Backend {
	return &hostVM{hostBackend: hostBackend{tier: tier, name: name}, reservations: map[uintptr]reservation{}, pages: map[Page]hostPage{}}
}

func (h *hostVM) Granularity() int64  { return HostPageSize }
func (h *hostVM) AddressSpace() int64 { return hostAddressSpace }

func (h *hostVM) ReserveAddress(size int64) (Region, error) {
	if err := checkRegionSize(h.name, size); err != nil || size%HostPageSize != 0 {
		return Region{}, fmt.Errorf("memory: %s: cannot reserve %d bytes of address space: %w", h.name, size, ErrInvalidArgument)
	}
	// A page more than asked, and the first page-aligned address in it:
	// Linux aligns large anonymous mappings to 2 MiB only since 6.7.
	whole, err := syscall.Mmap(-1, 0, int(size+HostPageSize), syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		return Region{}, fmt.Errorf("memory: %s: reserving %s of address space: %w (%w)", h.name, FormatBytes(size), ErrOutOfMemory, err)
	}
	off := -uintptr(unsafe.Pointer(&whole[0])) & (HostPageSize - 1)
	b := whole[off : off+uintptr(size) : off+uintptr(size)]
	addr := uintptr(unsafe.Pointer(&b[0]))
	h.reservations[addr] = reservation{whole: whole, b: b}
	return Region{Addr: addr, Host: b, Size: size}, nil
}

// Free returns a region from Alloc; a reservation is FreeAddress's (the
// mapping would go, the record of it stay).
func (h *hostVM) Free(r Region) error {
	if _, ok := h.reservations[r.Addr]; ok {
		return fmt.Errorf("memory: %s: Free of address space it reserved (%#x, %d bytes), which FreeAddress gives back: %w", h.name, r.Addr, r.Size, ErrDoubleFree)
	}
	return h.hostBackend.Free(r)
}

func (h *hostVM) FreeAddress(r Region) error {
	res, ok := h.reservations[r.Addr]
	if !ok || int64(len(res.b)) != r.Size {
		return fmt.Errorf("memory: %s: free of address space it did not reserve (%#x, %d bytes): %w", h.name, r.Addr, r.Size, ErrDoubleFree)
	}
	delete(h.reservations, r.Addr)
	return unmapHost(res.whole)
}

// largestRequest is the most bytes one allocation of an expandable pool
// over h may map (requestBound): the memory this process may use
// (hostMemoryLimit), 0 when that cannot be read. The pages of a memory
// file, like address space made writable, cost nothing until touched, so
// nothing else refuses a request far beyond the machine, as mmap refuses
// a classic segment that large; smaller requests may still map more than
// the machine has together, as classic segments may (a HostBudget bounds
// them).
func (h *hostVM) largestRequest() (int64, string) {
	h.largestOnce.Do(func() { h.largest, h.largestWhat = hostMemoryLimit() })
	return h.largest, h.largestWhat
}

func (h *hostVM) CreatePage() (Page, error) {
	pg := hostPage{off: -1}
	if h.file.open() {
		off, err := h.file.create()
		if err != nil {
			return 0, fmt.Errorf("memory: %s: creating a page: %w (%w)", h.name, ErrOutOfMemory, err)
		}
		pg.off = off
	}
	h.nextPage++
	h.pages[h.nextPage] = pg
	return h.nextPage, nil
}

func (h *hostVM) ReleasePage(p Page) error {
	pg, ok := h.pages[p]
	if !ok || pg.mapped > 0 {
		return fmt.Errorf("memory: %s: release of page %d, which is mapped or not ours: %w", h.name, p, ErrDoubleFree)
	}
	delete(h.pages, p)
	if pg.off >= 0 {
		if err := h.file.release(pg.off); err != nil {
			return fmt.Errorf("memory: %s: releasing page %d: %w", h.name, p, err)
		}
	}
	return nil
}

// span returns the bytes [addr, addr+n) of the reservation holding them.
func (h *hostVM) span(addr uintptr, n int64) ([]byte, error) {
	for base, res := range h.reservations {
		if b := res.b; addr >= base && addr%HostPageSize == 0 && int64(addr-base)+n <= int64(len(b)) {
			off := addr - base
			return b[off : off+uintptr(n)], nil
		}
	}
	return nil, fmt.Errorf("memory: %s: %d bytes at %#x are not page-aligned address space it reserved: %w", h.name, n, addr, ErrInvalidArgument)
}

func (h *hostVM) Map(addr uintptr, pages []Page) error {
	for _, p := range pages {
		if _, ok := h.pages[p]; !ok {
			return fmt.Errorf("memory: %s: map of page %d, which is not ours: %w", h.name, p, ErrInvalidArgument)
		}
	}
	b, err := h.span(addr, int64(len(pages))*HostPageSize)
	if err != nil {
		return err
	}
	for i, p := range pages {
		if err = h.mapPage(b[uintptr(i)*HostPageSize:][:HostPageSize], h.pages[p]); err != nil {
			for j := range i { // what was mapped goes, as the device backend does
				_ = h.unmapPage(b[uintptr(j)*HostPageSize:][:HostPageSize], h.pages[pages[j]])
			}
			break
		}
	}
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) {
			return fmt.Errorf("memory: %s: mapping %s: %w (%w)", h.name, FormatBytes(int64(len(b))), ErrOutOfMemory, err)
		}
		return fmt.Errorf("memory: %s: mapping %s: %w", h.name, FormatBytes(int64(len(b))), err)
	}
	for _, p := range pages {
		pg := h.pages[p]
		pg.mapped++
		h.pages[p] = pg
	}
	return nil
}

// Unmap gives the pages' memory back and makes them inaccessible.
func (h *hostVM) Unmap(addr uintptr, pages []Page) error {
	for _, p := range pages {
		if h.pages[p].mapped == 0 {
			return fmt.Errorf("memory: %s: unmap of page %d, which is not mapped: %w", h.name, p, ErrInvalidArgument)
		}
	}
	b, err := h.span(addr, int64(len(pages))*HostPageSize)
	if err != nil {
		return err
	}
	for i, p := range pages {
		at := b[uintptr(i)*HostPageSize:][:HostPageSize]
		var err error
		if h.unmapFault != nil {
			err = h.unmapFault(i)
		}
		if err == nil {
			err = h.unmapPage(at, h.pages[p])
		}
		if err != nil {
			// The pages unmapped so far are mapped back (VirtualMemory):
			// the caller keeps the range as mapped, and a page left
			// inaccessible behind its back was a fault at its next use.
			errs := []error{fmt.Errorf("memory: %s: unmapping %s: %w", h.name, FormatBytes(int64(len(b))), err)}
			for j := range i {
				if err := h.mapPage(b[uintptr(j)*HostPageSize:][:HostPageSize], h.pages[pages[j]]); err != nil {
					errs = append(errs, fmt.Errorf("memory: %s: mapping page %d back: %w", h.name, pages[j], err))
				}
			}
			return errors.Join(errs...)
		}
	}
	for _, p := range pages {
		pg := h.pages[p]
		pg.mapped--
		h.pages[p] = pg
	}
	return nil
}

// mapPage maps pg over at, a page of reserved address space: its range of
// the page file, or anonymous memory made readable and writable.
func (h *hostVM) mapPage(at []byte, pg hostPage) error {
	if pg.off >= 0 {
		return h.file.mapAt(at, pg.off)
	}
	return unix.Mprotect(at, unix.PROT_READ|unix.PROT_WRITE)
}

// unmapPage makes at reserved address space again (anonymous memory's
// contents given back first).
func (h *hostVM) unmapPage(at []byte, pg hostPage) error {
	if pg.off >= 0 {
		return h.file.unmapAt(at)
	}
	if err := madviseDontNeed(at); err != nil {
		return err
	}
	return unix.Mprotect(at, unix.PROT_NONE)
}

func (h *hostVM) Sync() error { return nil }

// madviseDontNeed drops the pages' contents (x/sys's Madvise: package
// syscall has none on darwin).
func madviseDontNeed(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
