package memory

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// holdingSync is a lateSync that holds one stream (StreamHolder), as
// CUDAStreams holds a captured graph's private pool.
type holdingSync struct {
	*lateSync
	held Stream
}

func (h *holdingSync) Held(s Stream) bool { return s == h.held }

// TestExpandableStealSkipsHeld checks that an expandable pool at its limit
// takes no pages from the free blocks of a held stream: a captured graph's
// replays write the blocks freed during capture. The other stream's
// allocation fails instead; once the stream is released, its pages move.
func TestExpandableStealSkipsHeld(t *testing.T) {
	ss := &holdingSync{newLateSync(), 3}
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, StreamSync: ss, Limit: 64 << 20})
	g, err := p.Alloc(40<<20, ss.held)
	require.NoError(t, err)
	addr := g.addr
	require.NoError(t, p.Free(g))
	_, err = p.Alloc(40<<20, 1)
	require.True(t, errors.Is(err, ErrOutOfMemory), "the held stream's pages stay: %v", err)
	p.mu.Lock()
	require.Equal(t, int64(40<<20), segmentAt(p, addr).mapped, "the held stream's free block is still mapped")
	checkExpandable(t, p)
	p.mu.Unlock()

	ss.held = 0
	b, err := p.Alloc(40<<20, 1)
	require.NoError(t, err, "released, the stream gives its pages")
	p.mu.Lock()
	checkBlockMapped(t, p, b, 40<<20, "after release")
	checkExpandable(t, p)
	p.mu.Unlock()
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Close())
}

// syncCountVM is a VirtualMemory that counts Sync calls and fails them
// while forbid is set, as a device capturing a CUDA graph refuses them.
type syncCountVM struct {
	VirtualMemory
	syncs  int
	forbid bool
}

func (v *syncCountVM) Sync() error {
	v.syncs++
	if v.forbid {
		return errors.New("synchronised while capturing")
	}
	return v.VirtualMemory.Sync()
}

// TestExpandableHeldGrowsWithoutSync checks that a held stream's range (a
// CUDA graph's private pool, growing while its graph is captured) takes
// pages from its own free blocks or creates them, and never steals from
// another stream's free pages or sweeps stale ranges, which would
// synchronise the device: another stream's 40 MiB of free pages stay where
// they are while the held stream grows by more than that.
func TestExpandableHeldGrowsWithoutSync(t *testing.T) {
	vm := &syncCountVM{VirtualMemory: NewHostBackend(TierDevice).(VirtualMemory)}
	ss := &holdingSync{newLateSync(), 3}
	p := NewPool(vm, PoolConfig{Expandable: true, StreamSync: ss})
	b, err := p.Alloc(40<<20, 1)
	require.NoError(t, err)
	other := b.addr
	require.NoError(t, p.Free(b))

	vm.forbid = true
	var live []*Block
	for i, n := range []int64{8 << 20, 8 << 20, 3 << 20, 12 << 20, 30 << 20, 5 << 20} {
		g, err := p.Alloc(n, ss.held)
		require.NoError(t, err, "allocation %d of the held stream", i)
		live = append(live, g)
		if i == 2 { // a free block in its own range, whose pages it lends
			require.NoError(t, p.Free(live[0]))
			live = live[1:]
		}
	}
	require.Zero(t, vm.syncs, "the held stream's growth synchronised")
	p.mu.Lock()
	require.Equal(t, int64(40<<20), segmentAt(p, other).mapped, "the other stream's free pages stayed mapped there")
	checkExpandable(t, p)
	p.mu.Unlock()

	vm.forbid, ss.held = false, 0
	for _, g := range live {
		require.NoError(t, p.Free(g))
	}
	g, err := p.Alloc(64<<20, 1)
	require.NoError(t, err, "released, the stream's pages serve others")
	require.NoError(t, p.Free(g))
	require.NoError(t, p.Close())
}
