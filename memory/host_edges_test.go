//go:build linux

package memory

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The page file may get descriptor 0 (a program that closed its standard
// input): it is open all the same, so a second page is a second range of
// the same file, not offset 0 of a new file that the first page's offset
// also names.
func TestHostPageFileOnDescriptorZero(t *testing.T) {
	saved, err := syscall.Dup(0)
	require.NoError(t, err)
	require.NoError(t, syscall.Close(0))
	defer func() {
		_ = unix.Dup2(saved, 0) // syscall has no Dup2 on linux/arm64
		_ = syscall.Close(saved)
	}()
	h := newHostBackend(TierHost, "host").(*hostVM)
	p1, err := h.CreatePage()
	require.NoError(t, err)
	if h.file.fd != 0 {
		t.Skipf("the page file got descriptor %d, not 0", h.file.fd)
	}
	p2, err := h.CreatePage()
	require.NoError(t, err)
	require.NotEqual(t, h.pages[p1].off, h.pages[p2].off, "two pages, one range of the page file")
	r, err := h.ReserveAddress(2 * HostPageSize)
	require.NoError(t, err)
	require.NoError(t, h.Map(r.Addr, []Page{p1, p2}))
	r.Host[0], r.Host[HostPageSize] = 1, 2
	require.Equal(t, byte(1), r.Host[0], "writing the second page changed the first")
	require.NoError(t, h.Unmap(r.Addr, []Page{p1, p2}))
	require.NoError(t, h.ReleasePage(p1))
	require.NoError(t, h.ReleasePage(p2))
	require.NoError(t, h.FreeAddress(r))
	require.Nil(t, h.file.file, "the page file is closed with its last page")
}

// Free takes regions from Alloc; address space from ReserveAddress is
// FreeAddress's. Freeing a reservation with Free unmapped it behind the
// backend's back (a later reservation at the same address was then
// FreeAddress's victim) and, under a budget, credited its whole size.
func TestHostVMFreeRefusesReservation(t *testing.T) {
	h := newHostBackend(TierHost, "host").(*hostVM)
	r, err := h.ReserveAddress(2 * HostPageSize)
	require.NoError(t, err)
	require.ErrorIs(t, h.Free(r), ErrDoubleFree)
	require.NoError(t, h.FreeAddress(r), "the reservation is still the backend's")

	b := NewHostBudget(1<<30, "test")
	w := NewBudgetBackend(NewHostBackend(TierHost), b).(VirtualMemory)
	r, err = w.ReserveAddress(hostAddressSpace)
	require.NoError(t, err)
	require.ErrorIs(t, w.Free(r), ErrDoubleFree)
	used, _ := b.Used()
	require.Zero(t, used)
	free, total, ok := w.Info()
	require.True(t, ok)
	require.Equal(t, int64(1<<30), free)
	require.Equal(t, int64(1<<30), total)
	require.NoError(t, w.FreeAddress(r))
}

// A share so small that it is less than a byte is not "off".
func TestHostMemoryTinyShare(t *testing.T) {
	_, err := ParseHostMemory("1e-300%", 1000)
	require.Error(t, err)
	_, err = ParseHostMemory("0.01%", 1000) // 0.1 byte
	require.Error(t, err)
	n, err := ParseHostMemory("0.1%", 1000)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	if limit, _ := hostMemoryLimit(); limit > 0 {
		t.Setenv(EnvHostMemory, "1e-300%")
		_, err = DefaultHostBudget()
		require.ErrorContains(t, err, EnvHostMemory+`="1e-300%"`)
	}
}

// The parsers of the files the default budget reads, on fixtures.
func TestHostLimitFiles(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int64{
		"max\n": -1, "9223372036854771712\n": -1, "4611686018427387904": -1, "0\n": -1, "-1": -1, "": -1, "lots": -1,
		"8589934592\n": 8 << 30, " 1048576 ": 1 << 20,
	} {
		f := filepath.Join(dir, "memory.max")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		v, ok := readLimit(f)
		if want < 0 {
			require.False(t, ok, "%q", content)
		} else {
			require.True(t, ok, "%q", content)
			require.Equal(t, want, v, "%q", content)
		}
	}
	_, ok := readLimit(filepath.Join(dir, "missing"))
	require.False(t, ok)

	meminfo := []byte("MemTotal:       24683792 kB\nMemFree:        22188032 kB\nMemAvailable:   24242568 kB\nSwapTotal: 0 kB\n")
	v, ok := meminfoField(meminfo, "MemTotal:")
	require.True(t, ok)
	require.Equal(t, int64(24683792)*1024, v)
	v, ok = meminfoField(meminfo, "MemAvailable:")
	require.True(t, ok)
	require.Equal(t, int64(24242568)*1024, v)
	_, ok = meminfoField([]byte("MemTotal:\n"), "MemTotal:")
	require.False(t, ok)
	_, ok = meminfoField(meminfo, "Hugetlb:")
	require.False(t, ok)
}

// The default budget: 75% of the limit, at most 90% of what is available.
func TestDefaultBudgetFigures(t *testing.T) {
	b, err := defaultBudget(8<<30, "RAM", 100<<30, true)
	require.NoError(t, err)
	require.Equal(t, int64(6<<30), b.Limit())
	b, err = defaultBudget(8<<30, "cgroup memory limit", 4<<30, true)
	require.NoError(t, err)
	require.Equal(t, int64(4<<30)/10*9, b.Limit())
	require.Contains(t, b.String(), "available at start")
	b, err = defaultBudget(8<<30, "RAM", 0, false)
	require.NoError(t, err)
	require.Equal(t, int64(6<<30), b.Limit())
	b, err = defaultBudget(0, "", 4<<30, true)
	require.NoError(t, err)
	require.Nil(t, b)
}

// TestHostReservationsAligned: every reservation starts on a page (2 MiB)
// boundary, which expandable segments need, also where the kernel does
// not align large anonymous mappings itself (Linux before 6.7): the
// backend reserves a page more and starts at the aligned address in it.
// Odd-sized mappings between the reservations move where the kernel puts
// the next one; the reservations' pages map, are written, and are freed.
func TestHostReservationsAligned(t *testing.T) {
	vm := newHostBackend(TierHost, "host").(*hostVM)
	var odd [][]byte
	defer func() {
		for _, b := range odd {
			require.NoError(t, syscall.Munmap(b))
		}
	}()
	var regions []Region
	for i := range 8 {
		b, err := syscall.Mmap(-1, 0, (i+1)*12288, syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		require.NoError(t, err)
		odd = append(odd, b)
		r, err := vm.ReserveAddress(int64(i+1) * HostPageSize)
		require.NoError(t, err)
		require.Zero(t, r.Addr%HostPageSize, "reservation %d at %#x", i, r.Addr)
		require.Equal(t, int(r.Size), len(r.Host))
		regions = append(regions, r)
	}
	pg, err := vm.CreatePage()
	require.NoError(t, err)
	last := regions[len(regions)-1]
	at := last.Addr + uintptr(last.Size) - HostPageSize // the last page of the reservation
	require.NoError(t, vm.Map(at, []Page{pg}))
	last.Host[last.Size-1] = 7
	require.NoError(t, vm.Unmap(at, []Page{pg}))
	require.NoError(t, vm.ReleasePage(pg))
	for _, r := range regions {
		require.NoError(t, vm.FreeAddress(r))
	}
	require.Empty(t, vm.reservations)
}

// Unmap is all or nothing: when a page fails to unmap, the pages before it
// are mapped back, so that the range its caller still takes as mapped (a
// free block whose pages stay in place) is usable, where they stayed
// inaccessible and its next use was a fault.
func TestHostVMUnmapFailureMapsBack(t *testing.T) {
	h := newHostBackend(TierHost, "host").(*hostVM)
	var pages []Page
	for range 3 {
		p, err := h.CreatePage()
		require.NoError(t, err)
		pages = append(pages, p)
	}
	r, err := h.ReserveAddress(3 * HostPageSize)
	require.NoError(t, err)
	require.NoError(t, h.Map(r.Addr, pages))
	for k := range 3 {
		r.Host[k*HostPageSize] = byte(k + 1)
	}
	h.unmapFault = func(i int) error {
		if i == 2 {
			return syscall.EIO
		}
		return nil
	}
	require.ErrorIs(t, h.Unmap(r.Addr, pages), syscall.EIO)
	h.unmapFault = nil

	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for k := range 3 {
		func() {
			defer func() {
				if e := recover(); e != nil {
					t.Fatalf("page %d is inaccessible after the failed Unmap: %v", k, e)
				}
			}()
			r.Host[k*HostPageSize]++
		}()
		if h.file.file != nil { // pages of the page file keep their bytes
			require.Equal(t, byte(k+2), r.Host[k*HostPageSize], "page %d", k)
		}
	}
	require.NoError(t, h.Unmap(r.Addr, pages), "every page is still mapped once")
	for _, p := range pages {
		require.NoError(t, h.ReleasePage(p))
	}
	require.NoError(t, h.FreeAddress(r))
}
