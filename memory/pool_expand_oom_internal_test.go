package memory

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpandableFailedGrowthGivesBackPages: growth that gathers some of
// its pages (lent by the stream's own free block, or stolen from another
// stream's) and creates others before the device runs out (below any
// limit, so nothing refuses it up front) gives back the pages it created
// and leaves the bytes reserved where they were: the lent pages are free
// memory where they were lent from again, the stolen ones free memory of
// the range they were moved to. It used to keep the created pages mapped
// as free memory of the range.
func TestExpandableFailedGrowthGivesBackPages(t *testing.T) {
	for _, s := range []Stream{0, 1} {
		t.Run(fmt.Sprint("stream ", s), func(t *testing.T) {
			const MiB = 1 << 20
			v := newStrictVM(NewHostBackend(TierDevice).(VirtualMemory))
			v.capacity = 10
			p := NewPool(v, PoolConfig{Expandable: true})
			a, err := p.Alloc(8*MiB, 0)
			require.NoError(t, err)
			b, err := p.Alloc(4*MiB, 0)
			require.NoError(t, err)
			require.NoError(t, p.Free(a)) // 4 free pages
			before := p.Stats()
			require.Len(t, v.places, 6)

			// 15 pages: 4 taken from a's block, 4 created, then the device is full.
			_, err = p.Alloc(30*MiB, s)
			require.True(t, errors.Is(err, ErrOutOfMemory), "%v", err)
			after := p.Stats()
			require.Equal(t, before.Reserved.Current, after.Reserved.Current, "the failed growth keeps nothing")
			require.Equal(t, after.BackendAllocs-before.BackendAllocs, after.BackendFrees-before.BackendFrees, "every page created was released")
			require.Len(t, v.places, 6, "the pages created for the request are released")
			p.mu.Lock()
			v.checkAgrees(t, p, "after the failure")
			checkExpandable(t, p)
			require.Zero(t, p.staleBytes, "nothing stays lent")
			p.mu.Unlock()

			// What fits still fits: the 4 free pages and 4 new ones.
			c, err := p.Alloc(16*MiB, s)
			require.NoError(t, err)
			p.mu.Lock()
			v.checkDeviceMapped(t, p, c, "after")
			checkExpandable(t, p)
			p.mu.Unlock()
			for _, x := range []*Block{b, c} {
				require.NoError(t, p.Free(x))
			}
			require.NoError(t, p.EmptyCache())
			require.NoError(t, p.Close())
			require.Empty(t, v.places)
			require.NoError(t, v.err)
		})
	}
}

// TestExpandableRefusesBeyondRoom: a request whose pages cannot all be
// had under the pool's limit, even taking every free page, is refused
// before the backend is asked for any.
func TestExpandableRefusesBeyondRoom(t *testing.T) {
	const MiB = 1 << 20
	v := newStrictVM(NewHostBackend(TierDevice).(VirtualMemory))
	p := NewPool(v, PoolConfig{Expandable: true, Limit: 64 * MiB})
	a, err := p.Alloc(10*MiB, 0)
	require.NoError(t, err)
	before := p.Stats()
	_, err = p.Alloc(100*MiB, 0)
	require.True(t, errors.Is(err, ErrOutOfMemory), "%v", err)
	after := p.Stats()
	require.Equal(t, before.BackendAllocs, after.BackendAllocs, "no page created")
	require.Equal(t, before.PagesMapped, after.PagesMapped, "no page mapped")
	require.NoError(t, p.Free(a))
	require.NoError(t, p.Close())
	require.Empty(t, v.places)
}
