package cuda

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// vmmRange is a reserved address range with pages of MemCreate memory
// mapped into it, for TestGPUVMMCopies.
type vmmRange struct {
	base    DevicePtr
	size    int
	handles []MemHandle
}

// Access patterns of mapVMM: one cuMemSetAccess over the run, one per
// page, one per page and then one over the run, or one per growth (the
// first page, then the other three, as an expandable segment grows).
const (
	accessRun = iota
	accessPage
	accessPageThenRun
	accessGrowth
)

// mapVMM reserves reserve bytes and maps pages fresh pages at its start
// (or the given handles, when not nil), giving access as the pattern says.
func mapVMM(t *testing.T, c *Context, reserve, pages int, access int, handles []MemHandle) *vmmRange {
	t.Helper()
	g, err := c.MemAllocationGranularity()
	require.NoError(t, err)
	base, err := c.MemAddressReserve(reserve, g)
	require.NoError(t, err)
	r := &vmmRange{base: base, size: reserve}
	t.Cleanup(func() {
		require.NoError(t, c.Synchronize())
		for i := range r.handles {
			require.NoError(t, c.MemUnmap(base.Add(i*g), g))
		}
		if handles == nil {
			for _, h := range r.handles {
				require.NoError(t, c.MemRelease(h))
			}
		}
		require.NoError(t, c.MemAddressFree(base, reserve))
	})
	for i := range pages {
		h := MemHandle(0)
		if handles != nil {
			h = handles[i]
		} else {
			h, err = c.MemCreate(g)
			require.NoError(t, err)
		}
		require.NoError(t, c.MemMap(base.Add(i*g), g, h))
		r.handles = append(r.handles, h)
		if access == accessPage || access == accessPageThenRun || (access == accessGrowth && i == 0) {
			require.NoError(t, c.MemSetAccess(base.Add(i*g), g))
		}
	}
	switch access {
	case accessRun, accessPageThenRun:
		require.NoError(t, c.MemSetAccess(base, pages*g))
	case accessGrowth:
		require.NoError(t, c.MemSetAccess(base.Add(g), (pages-1)*g))
	}
	return r
}

// TestGPUVMMCopies runs every kind of copy into and out of memory mapped
// through the virtual memory API, at several offsets and lengths (inside
// a page, across a page boundary, over every page) and layouts (access
// given per page or over the run, a small or a device-sized reservation,
// a page mapped at two addresses), and reports each failure with its
// place: expandable segments (package memory) copy into such memory.
func TestGPUVMMCopies(t *testing.T) {
	c := gpuContext(t)
	if !c.VMMSupported() {
		t.Skip("no virtual memory management API")
	}
	g, err := c.MemAllocationGranularity()
	require.NoError(t, err)
	const pages = 4
	total := int(c.Properties().TotalMem)
	big := (2*total + g - 1) / g * g
	layouts := []struct {
		name     string
		reserve  int
		access   int
		aliasing bool
	}{
		{"run access, small reservation", pages * g, accessRun, false},
		{"page access, small reservation", pages * g, accessPage, false},
		{"page then run access, small reservation", pages * g, accessPageThenRun, false},
		{"growth access, small reservation", pages * g, accessGrowth, false},
		{"run access, 2x device reservation", big, accessRun, false},
		{"page access, 2x device reservation", big, accessPage, false},
		{"growth access, 2x device reservation", big, accessGrowth, false},
		{"pages also mapped elsewhere", pages * g, accessRun, true},
	}
	s, err := c.NewStream()
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Destroy()) }()
	pinnedPtr, pinned, err := c.MemHostAlloc(pages*g, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.MemFreeHost(pinnedPtr)) }()
	classic, err := c.MemAlloc(pages * g)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.MemFree(classic)) }()

	rng := rand.New(rand.NewPCG(3, 4))
	spans := [][2]int{{0, 256}, {g - 4096, 8192}, {g / 2, 64<<10 + 1}, {17, 3*g + 5}, {0, pages * g}}
	var failures []string
	for _, l := range layouts {
		var handles []MemHandle
		if l.aliasing {
			first := mapVMM(t, c, pages*g, pages, accessRun, nil)
			handles = first.handles
		}
		r := mapVMM(t, c, l.reserve, pages, l.access, handles)
		require.NoError(t, c.MemsetD8(r.base, 0, pages*g))
		require.NoError(t, c.Synchronize())
		for _, sp := range append(append([][2]int{}, spans...), spans...) { // each span twice: flaky failures show
			off, n := sp[0], sp[1]
			dst := r.base.Add(off)
			src := randomBytes(rng, n)
			copy(pinned, src)
			check := func(kind string, err error) {
				if err != nil {
					failures = append(failures, fmt.Sprintf("%s: %s of %d bytes at page offset %d: %v", l.name, kind, n, off, err))
					return
				}
				got := make([]byte, n)
				if err := c.MemcpyDtoH(got, dst); err != nil {
					failures = append(failures, fmt.Sprintf("%s: read-back after %s of %d bytes at %d: %v", l.name, kind, n, off, err))
				} else if !bytes.Equal(got, src) {
					failures = append(failures, fmt.Sprintf("%s: %s of %d bytes at %d: wrong data", l.name, kind, n, off))
				}
				require.NoError(t, c.MemsetD8(dst, 0, n))
			}
			check("MemcpyHtoD", c.MemcpyHtoD(dst, src))
			check("MemcpyHtoDAsync pageable, null stream", errors2(c.MemcpyHtoDAsync(dst, src, nil), c.Synchronize()))
			check("MemcpyHtoDAsync pageable, own stream", errors2(c.MemcpyHtoDAsync(dst, src, s), s.Synchronize()))
			check("MemcpyHtoDAsync pinned, own stream", errors2(c.MemcpyHtoDAsyncPtr(dst, unsafe.Pointer(&pinned[0]), n, s), s.Synchronize()))
			require.NoError(t, c.MemcpyHtoD(classic, src))
			check("MemcpyDtoD from cuMemAlloc", c.MemcpyDtoD(dst, classic, n))
			check("MemcpyDtoDAsync from cuMemAlloc, own stream", errors2(c.MemcpyDtoDAsync(dst, classic, n, s), s.Synchronize()))
			// VMM to VMM: the data is put at the range's end first.
			other := r.base.Add(pages*g - n)
			if other >= dst.Add(n) || other.Add(n) <= dst {
				require.NoError(t, c.MemcpyHtoD(other, src))
				check("MemcpyDtoDAsync within the range", errors2(c.MemcpyDtoDAsync(dst, other, n, s), s.Synchronize()))
			}
			// Out of the range, asynchronously.
			require.NoError(t, c.MemcpyHtoD(dst, src))
			back := make([]byte, n)
			err := errors2(c.MemcpyDtoHAsync(back, dst, s), s.Synchronize())
			if err != nil || !bytes.Equal(back, src) {
				failures = append(failures, fmt.Sprintf("%s: MemcpyDtoHAsync of %d bytes at %d: %v (data equal %v)", l.name, n, off, err, bytes.Equal(back, src)))
			}
			require.NoError(t, c.MemsetD8(dst, 0, n))
		}
	}
	if len(failures) > 0 {
		t.Errorf("%d copies failed on memory of the virtual memory API:\n%s", len(failures), strings.Join(failures, "\n"))
	}
}

// errors2 returns the first error of a copy and the synchronisation after
// it.
func errors2(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
