package memory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// strictVM is a VirtualMemory that checks what a driver would: Map onto
// addresses with nothing mapped, Unmap of the very pages mapped there,
// ReleasePage of pages mapped nowhere. It keeps the device's view of every
// page address, against which a test checks the blocks the pool hands out
// (mappedAt), and can run out of pages below the pool's limit (capacity:
// the device's memory, shared with others).
type strictVM struct {
	VirtualMemory
	at       map[uintptr]Page // the page mapped at each page address
	places   map[Page]int     // addresses each created page is mapped at
	capacity int              // most pages alive at once; 0: no bound
	err      error            // the first misuse seen
}

func newStrictVM(vm VirtualMemory) *strictVM {
	return &strictVM{VirtualMemory: vm, at: map[uintptr]Page{}, places: map[Page]int{}}
}

func (v *strictVM) fail(format string, args ...any) error {
	err := fmt.Errorf("strictVM: "+format+": %w", append(args, ErrInvalidArgument)...)
	if v.err == nil {
		v.err = err
	}
	return err
}

func (v *strictVM) CreatePage() (Page, error) {
	if v.capacity > 0 && len(v.places) >= v.capacity {
		return 0, fmt.Errorf("strictVM: device full: %w", ErrOutOfMemory)
	}
	pg, err := v.VirtualMemory.CreatePage()
	if err == nil {
		v.places[pg] = 0
	}
	return pg, err
}

func (v *strictVM) ReleasePage(pg Page) error {
	if n, ok := v.places[pg]; !ok || n > 0 {
		return v.fail("release of page %d, mapped at %d places or not created", pg, n)
	}
	delete(v.places, pg)
	return v.VirtualMemory.ReleasePage(pg)
}

func (v *strictVM) Map(addr uintptr, pages []Page) error {
	g := uintptr(v.Granularity())
	for i, pg := range pages {
		a := addr + uintptr(i)*g
		if old, ok := v.at[a]; ok {
			return v.fail("map of page %d at %#x, where page %d is mapped", pg, a, old)
		}
		if _, ok := v.places[pg]; !ok {
			return v.fail("map of page %d, not created or released", pg)
		}
	}
	if err := v.VirtualMemory.Map(addr, pages); err != nil {
		return err
	}
	for i, pg := range pages {
		v.at[addr+uintptr(i)*g] = pg
		v.places[pg]++
	}
	return nil
}

func (v *strictVM) Unmap(addr uintptr, pages []Page) error {
	g := uintptr(v.Granularity())
	for i, pg := range pages {
		a := addr + uintptr(i)*g
		if old, ok := v.at[a]; !ok || old != pg {
			return v.fail("unmap of page %d at %#x, where page %d is mapped (mapped: %v)", pg, a, old, ok)
		}
	}
	if err := v.VirtualMemory.Unmap(addr, pages); err != nil {
		return err
	}
	for i, pg := range pages {
		delete(v.at, addr+uintptr(i)*g)
		v.places[pg]--
	}
	return nil
}

// checkDeviceMapped checks, on the device's side, that every page of a
// block's range is mapped.
func (v *strictVM) checkDeviceMapped(t testing.TB, p *Pool, b *Block, at string) {
	t.Helper()
	require.NoError(t, v.err, at)
	g := p.page
	lo, hi := int64(b.addr)/g*g, (int64(b.addr)+b.size+g-1)/g*g
	for a := lo; a < hi; a += g {
		_, ok := v.at[uintptr(a)]
		require.True(t, ok, "%s: the block at %#x (%d bytes) has page %#x unmapped on the device", at, b.addr, b.size, a)
	}
}

// checkAgrees checks that the pool's record of the pages of its expandable
// segments is the device's: the same page at every address, nothing
// mapped where the pool has none.
func (v *strictVM) checkAgrees(t testing.TB, p *Pool, at string) {
	t.Helper()
	require.NoError(t, v.err, at)
	g := uintptr(p.page)
	n := 0
	for seg := p.segs; seg != nil; seg = seg.next {
		if seg.x == nil {
			continue
		}
		base := seg.region.Addr
		for a := base; a < base+uintptr(seg.region.Size); a += g {
			i := int((a - base) / g)
			var want Page
			if i < len(seg.x.pages) {
				want = seg.x.pages[i]
			}
			got, ok := v.at[a]
			if want != 0 {
				n++
			}
			if got != want || ok != (want != 0) { // plain tests: this runs for every page of every step
				require.Fail(t, "pool and device disagree", "%s: page at %#x (segment %#x, page %d): the pool has %d, the device %d (mapped: %v)",
					at, a, base, i, want, got, ok)
			}
			if i >= len(seg.x.pages) {
				break // the rest of the range is a hole in the pool's record; the device's map is checked by count below
			}
		}
	}
	require.Equal(t, len(v.at), n, "%s: pages mapped on the device outside the pool's record", at)
}
