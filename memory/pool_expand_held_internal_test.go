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
