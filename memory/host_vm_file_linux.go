//go:build linux

package memory

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageFile gives the host backend's pages an identity, as a GPU's have: a
// page is a HostPageSize range of a memfd, and mapping it maps that range
// (MAP_SHARED), so a page mapped at two places (lent by an expandable
// segment while still mapped where it was) is one memory at both, and a
// write through either address shows at the other. Without it each place
// had bytes of its own, and a pool that wrote live data through two
// mappings of one page went unseen on the CPU while on a GPU the two
// overwrote each other. The file is opened with the first page and closed
// with the last (or by the garbage collector, with a backend dropped with
// pages still made: an *os.File closes itself; the mappings outlive it).
type pageFile struct {
	file *os.File
	fd   int     // file's descriptor while open (which may be 0: file says whether it is)
	size int64   // the file's length
	free []int64 // offsets of released pages, for reuse
}

// open makes the memfd; false when the kernel has none (the host backend
// then maps anonymous memory at each place).
func (f *pageFile) open() bool {
	if f.file != nil {
		return true
	}
	fd, err := unix.MemfdCreate("strata-host-pages", unix.MFD_CLOEXEC)
	if err != nil {
		return false
	}
	f.file, f.fd, f.size, f.free = os.NewFile(uintptr(fd), "strata-host-pages"), fd, 0, nil
	return true
}

// create returns the offset of a new page.
func (f *pageFile) create() (int64, error) {
	if n := len(f.free); n > 0 {
		off := f.free[n-1]
		f.free = f.free[:n-1]
		return off, nil
	}
	if err := unix.Ftruncate(f.fd, f.size+HostPageSize); err != nil {
		return 0, fmt.Errorf("growing the page file: %w", err)
	}
	f.size += HostPageSize
	return f.size - HostPageSize, nil
}

// release gives page off's memory back (a hole punched in the file) and
// closes the file when no page of it is left.
func (f *pageFile) release(off int64) error {
	err := unix.Fallocate(f.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, HostPageSize)
	f.free = append(f.free, off)
	if int64(len(f.free)) == f.size/HostPageSize {
		err = errors.Join(err, f.file.Close())
		f.file, f.fd, f.size, f.free = nil, 0, 0, nil
	}
	return err
}

// mapAt maps page off over at (a page of reserved address space),
// readable and writable.
func (f *pageFile) mapAt(at []byte, off int64) error {
	_, err := unix.MmapPtr(f.fd, off, unsafe.Pointer(unsafe.SliceData(at)), uintptr(len(at)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED)
	return err
}

// unmapAt makes at reserved address space again.
func (f *pageFile) unmapAt(at []byte) error {
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(at)), uintptr(len(at)), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED|unix.MAP_NORESERVE)
	return err
}
