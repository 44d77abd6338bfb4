package memory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func dumpSeg(p *Pool, seg *segment) string {
	s := ""
	for b := seg.first; b != nil; b = b.next {
		s += fmt.Sprintf("[%d+%d st%d] ", int64(b.addr-seg.region.Addr)>>20, b.size>>20, b.state)
		if b.size > 1<<30 {
			break
		}
	}
	s += fmt.Sprintf("pages %v stale %v", seg.x.pages, seg.x.stale)
	return s
}

// TestCloseHeldStreamWithStaleRanges: a manager closed while a stream is still held
// (a captured CUDA graph's private pool) whose stale range lies above the
// place its pages were lent to, with a hole between, must give every page
// back to the backend (and the budget) without an error.
func TestCloseHeldStreamWithStaleRanges(t *testing.T) {
	const mib = 1 << 20
	ss := &holdingSync{newLateSync(), 0}
	budget := NewHostBudget(256*mib, "test")
	vm := NewBudgetBackend(NewHostBackend(TierDevice), budget)
	p := NewPool(vm, PoolConfig{Expandable: true, StreamSync: ss})
	const s Stream = 3
	var blocks []*Block
	for _, n := range []int64{8 * mib, 8 * mib, 8 * mib, 8 * mib, 8 * mib, 6 * mib, 10 * mib} {
		b, err := p.Alloc(n, s)
		require.NoError(t, err)
		blocks = append(blocks, b)
	}
	// Two holes: blocks 1 and 3, given back while the stream is not held.
	require.NoError(t, p.Free(blocks[1]))
	require.NoError(t, p.Free(blocks[3]))
	require.NoError(t, p.EmptyCache())
	ss.held = s // a graph's capture begins
	require.NoError(t, p.Free(blocks[5]))
	d, err := p.Alloc(8*mib, s)
	require.NoError(t, err)
	p.mu.Lock()
	seg := segmentAt(p, d.addr)
	t.Log(dumpSeg(p, seg))
	require.Positive(t, seg.x.staleBytes, "the free block's pages were lent")
	p.mu.Unlock()
	_ = d
	err = p.Close()
	require.ErrorIs(t, err, ErrLeaked)
	t.Log(err)
	used, _ := budget.Used()
	require.Zero(t, used, "every page given back")
	require.NotContains(t, err.Error(), "mapped or not ours")
}
