package memory

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpandableStealAfterSweep: the first unmapping steal of another
// stream's segment syncs and sweeps the stale ranges; the sweep merged a
// stale block (the left neighbour stealFrom had kept) into the hole
// before it and recycled its struct, so the walk of that segment stopped
// and the whole free pages before it (E) were never looked at: under a
// Limit the allocation failed although E's pages were enough, and the
// same call right after succeeded. Found by a reviewer helper (session
// 40); stealFrom now takes the neighbour again after the sweep.
func TestExpandableStealAfterSweep(t *testing.T) {
	const mib = 1 << 20
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true})
	alloc := func(n int64, s Stream) *Block {
		b, err := p.Alloc(n, s)
		require.NoError(t, err)
		return b
	}
	a0 := alloc(4*mib, 2) // E, pages 0-1
	_ = alloc(2*mib, 2)   // M, page 2
	xb := alloc(4*mib, 2) // X, pages 3-4
	f := alloc(4*mib, 2)  // F, pages 5-6
	l := alloc(4*mib, 2)  // L, pages 7-8
	_ = alloc(2*mib, 2)   // Z, page 9
	require.NoError(t, p.Free(xb))
	require.NoError(t, p.EmptyCache()) // X: a hole
	require.NoError(t, p.Free(f))
	_ = alloc(12*mib, 2) // lends F's pages: F stale, right after the hole X
	require.NoError(t, p.Free(l))
	require.NoError(t, p.Free(a0))
	p.mu.Lock()
	checkExpandable(t, p)
	require.Equal(t, int64(4*mib), p.staleBytes)
	p.cfg.Limit = p.sinks.own.Reserved.Current // room only for what stealing gives
	free := p.sinks.own.Reserved.Current - p.sinks.own.Allocated.Current
	p.mu.Unlock()
	require.Equal(t, int64(8*mib), free, "E and L: 4 whole free pages")
	_, err := p.Alloc(8*mib, 1)
	p.mu.Lock()
	checkExpandable(t, p)
	p.mu.Unlock()
	_, err2 := p.Alloc(8*mib, 1)
	require.NoError(t, err, "4 whole free pages were there to steal (second try: %v)", err2)
}

// holdSync is lateSync that holds the streams in held (StreamHolder).
type holdSync struct {
	*lateSync
	held    map[Stream]bool
	failRNG *rand.Rand
}

func (h *holdSync) Held(s Stream) bool { return h.held[s] }

// RecordEvent fails now and then when failRNG is set.
func (h *holdSync) RecordEvent(s Stream) (StreamEvent, error) {
	if h.failRNG != nil && h.failRNG.IntN(20) == 0 {
		return 0, errRecordFault
	}
	return h.lateSync.RecordEvent(s)
}

var errRecordFault = errors.New("injected record fault")

// smallSpaceVM reserves little address space per expandable segment, so
// that a stream grows a second segment.
type smallSpaceVM struct {
	VirtualMemory
	space int64
}

func (v smallSpaceVM) AddressSpace() int64 { return v.space }

// TestExpandableCloseHeldStaleAcrossSegments: a held stream (a graph's
// private pool) lends pages from its first segment to its second; its
// stale ranges were not swept at Close, and closeExpandable of the newer
// segment (closed first) released the lent pages while the older one still
// mapped them (refused); the older one then skipped them as stale: every
// such page leaked. Found by a reviewer helper (session 40); Close now
// sweeps every stale range, held streams' too, after one Sync.
func TestExpandableCloseHeldStaleAcrossSegments(t *testing.T) {
	const mib = 1 << 20
	host := NewHostBackend(TierDevice).(*hostVM)
	vm := newStrictVM(host)
	ss := &holdSync{lateSync: newLateSync(), held: map[Stream]bool{1: true}}
	p := NewPool(smallSpaceVM{VirtualMemory: vm, space: 16 * mib}, PoolConfig{Expandable: true, StreamSync: ss})
	a, err := p.Alloc(8*mib, 1)
	require.NoError(t, err)
	b, err := p.Alloc(8*mib, 1)
	require.NoError(t, err)
	require.NoError(t, p.Free(a))
	c, err := p.Alloc(12*mib, 1) // a second segment; a's pages lent to it
	require.NoError(t, err)
	p.mu.Lock()
	checkExpandable(t, p)
	require.Equal(t, 2, p.nsegs)
	require.Equal(t, int64(8*mib), p.staleBytes)
	p.mu.Unlock()
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(c))
	err = p.Close()
	require.NoError(t, vm.err, "strict VM")
	require.NoError(t, err)
	require.Empty(t, host.pages, "pages leaked")
}
