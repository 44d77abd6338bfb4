package memtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// VMData gives RunVirtualMemory access to a backend's bytes: Write sets n
// bytes at an address to v, Read copies n bytes back (the host's view, or
// copies from a device). Aliases says a page mapped at two places shows
// the same bytes at both (true on a GPU; host pages are tokens, each
// mapping its own memory).
type VMData struct {
	Write   func(addr uintptr, n int, v byte)
	Read    func(addr uintptr, n int) []byte
	Aliases bool
}

// RunVirtualMemory runs the conformance suite of the virtual memory API on
// a backend: the granularity, reserving and freeing address space,
// creating, mapping, unmapping and releasing pages, a page mapped at two
// places at once, the misuse each must refuse, and an expandable pool
// over it. With data, the bytes go through the mapped pages too. Every
// memory.VirtualMemory must pass it.
func RunVirtualMemory(t *testing.T, vm memory.VirtualMemory, data *VMData) {
	t.Helper()
	var write func(addr uintptr, n int, v byte)
	var read func(addr uintptr, n int) []byte
	if data != nil {
		write, read = data.Write, data.Read
	}
	g := vm.Granularity()
	require.Positive(t, g)
	require.Zero(t, g&(g-1), "the granularity is a power of two")
	require.Zero(t, g%memory.MinBlockSize)
	require.GreaterOrEqual(t, vm.AddressSpace(), 4*g)
	require.Zero(t, vm.AddressSpace()%g)

	t.Run("reserve-map-unmap", func(t *testing.T) {
		r, err := vm.ReserveAddress(4 * g)
		require.NoError(t, err)
		require.NotZero(t, r.Addr)
		require.Zero(t, r.Addr%uintptr(g), "reservations are page-aligned")
		require.Equal(t, 4*g, r.Size)
		pages := make([]memory.Page, 3)
		seen := map[memory.Page]bool{}
		for i := range pages {
			pages[i], err = vm.CreatePage()
			require.NoError(t, err)
			require.NotZero(t, pages[i])
			require.False(t, seen[pages[i]], "pages are distinct")
			seen[pages[i]] = true
		}
		// Two pages at the start, one at the end: a hole between them.
		require.NoError(t, vm.Map(r.Addr, pages[:2]))
		require.NoError(t, vm.Map(r.Addr+uintptr(3*g), pages[2:]))
		if write != nil {
			write(r.Addr, int(2*g), 0x5a)
			write(r.Addr+uintptr(3*g), int(g), 0xa5)
			require.Equal(t, byte(0x5a), read(r.Addr+uintptr(2*g-1), 1)[0])
			require.Equal(t, byte(0xa5), read(r.Addr+uintptr(3*g), 1)[0])
		}
		// The last page mapped a second time, in the hole: the same memory.
		require.NoError(t, vm.Map(r.Addr+uintptr(2*g), pages[2:]))
		if write != nil && data.Aliases {
			write(r.Addr+uintptr(2*g), 1, 0x3c)
			require.Equal(t, byte(0x3c), read(r.Addr+uintptr(3*g), 1)[0], "a page mapped twice shows the same bytes")
		}
		require.NoError(t, vm.Sync())
		require.NoError(t, vm.Unmap(r.Addr+uintptr(2*g), pages[2:]))
		require.NoError(t, vm.Unmap(r.Addr+uintptr(3*g), pages[2:]))
		require.NoError(t, vm.Unmap(r.Addr, pages[:2]))
		for _, pg := range pages {
			require.NoError(t, vm.ReleasePage(pg))
		}
		require.NoError(t, vm.FreeAddress(r))
	})
	t.Run("misuse", func(t *testing.T) {
		_, err := vm.ReserveAddress(g + memory.MinBlockSize)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, "a reservation of no whole number of pages")
		_, err = vm.ReserveAddress(0)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		r, err := vm.ReserveAddress(g)
		require.NoError(t, err)
		require.NoError(t, vm.FreeAddress(r))
		require.ErrorIs(t, vm.FreeAddress(r), memory.ErrDoubleFree, "address space freed twice")
		pg, err := vm.CreatePage()
		require.NoError(t, err)
		require.NoError(t, vm.ReleasePage(pg))
		require.ErrorIs(t, vm.ReleasePage(pg), memory.ErrDoubleFree, "a page released twice")
	})
	t.Run("pool", func(t *testing.T) {
		// An expandable pool over the backend: blocks in mapped pages,
		// EmptyCache gives every page and the address space back.
		p := memory.NewPool(vm, memory.PoolConfig{Expandable: true})
		var blocks []*memory.Block
		for i, n := range []int64{1, 4096, g - 512, g + 1, 3 * g} {
			b, err := p.Alloc(n, 0)
			require.NoError(t, err)
			if write != nil {
				write(b.Addr(), int(n), byte(i+1))
			}
			blocks = append(blocks, b)
		}
		if read != nil {
			for i, b := range blocks {
				got := read(b.Addr(), int(b.Size()))
				require.Equal(t, byte(i+1), got[0], "block %d", i)
				require.Equal(t, byte(i+1), got[len(got)-1], "block %d", i)
			}
		}
		st := p.Stats()
		require.LessOrEqual(t, st.Reserved.Current, st.Allocated.Current+2*g, "expandable segments map little more than they hand out")
		for _, b := range blocks {
			require.NoError(t, p.Free(b))
		}
		require.NoError(t, p.EmptyCache())
		require.Zero(t, p.Stats().Reserved.Current)
		require.Empty(t, p.Segments())
		require.NoError(t, p.Close())
	})
}
