package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// holdingSync is a StreamSync that holds some streams (StreamHolder).
type holdingSync struct {
	*memtest.StreamSync
	held map[memory.Stream]bool
}

func (h holdingSync) Held(s memory.Stream) bool { return h.held[s] }

// A held stream's free segments survive EmptyCache and the retry before
// an out-of-memory error (a captured CUDA graph's private pool); others'
// go, and the held ones go once the hold ends. Classic and expandable.
func TestPoolHeldStreamKeepsSegments(t *testing.T) {
	const held, other = memory.Stream(3), memory.Stream(0)
	hs := holdingSync{StreamSync: memtest.NewStreamSync(), held: map[memory.Stream]bool{held: true}}
	fb := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<40), 0)
	p := memory.NewPool(fb, memory.PoolConfig{StreamSync: hs})
	segs := func(s memory.Stream) (n int) {
		for _, seg := range p.Segments() {
			if seg.Stream == s {
				n++
			}
		}
		return n
	}
	for _, s := range []memory.Stream{held, other} {
		for _, size := range []int64{512, 3 << 20, 40 << 20} {
			b, err := p.Alloc(size, s)
			require.NoError(t, err)
			require.NoError(t, p.Free(b))
		}
	}
	require.Equal(t, 3, segs(held))
	require.Equal(t, 3, segs(other))
	require.NoError(t, p.EmptyCache())
	require.Equal(t, 3, segs(held), "a held stream keeps its free segments")
	require.Zero(t, segs(other))
	hs.held[held] = false
	require.NoError(t, p.EmptyCache())
	require.Zero(t, segs(held), "released once the hold ends")
	require.NoError(t, p.Close())
}

// EmptyStreamCache gives back one stream's free segments, held or not,
// and leaves the others' cache.
func TestManagerEmptyStreamCache(t *testing.T) {
	const s1, s2 = memory.Stream(7), memory.Stream(9)
	m, err := memory.NewManager([]memory.Backend{memtest.NewAddressBackend(memory.TierDevice, 1<<40)},
		memory.Config{Policy: memory.SingleTierPolicy(memory.TierDevice)})
	require.NoError(t, err)
	defer m.Close()
	for _, s := range []memory.Stream{s1, s2} {
		a, err := m.AllocStream(3<<20, memory.RoleActivation, s)
		require.NoError(t, err)
		require.Equal(t, s, a.Stream())
		require.Same(t, m, a.Manager())
		require.NoError(t, a.Free())
	}
	reserved := func() int64 { return m.Stats().Total.Reserved.Current }
	before := reserved()
	require.NoError(t, m.EmptyStreamCache(s1))
	require.Less(t, reserved(), before, "s1's segment went back")
	require.Positive(t, reserved(), "s2's stayed")
	require.NoError(t, m.EmptyStreamCache(s2))
	require.Zero(t, reserved())
}

// Under a limit, a request that needs the held stream's cached memory
// fails with ErrOutOfMemory instead of taking it.
func TestPoolHeldStreamOutOfMemory(t *testing.T) {
	const held = memory.Stream(5)
	hs := holdingSync{StreamSync: memtest.NewStreamSync(), held: map[memory.Stream]bool{held: true}}
	fb := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<40), 0)
	p := memory.NewPool(fb, memory.PoolConfig{StreamSync: hs, Limit: 64 << 20})
	b, err := p.Alloc(40<<20, held)
	require.NoError(t, err)
	require.NoError(t, p.Free(b))
	_, err = p.Alloc(40<<20, 0)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	hs.held[held] = false
	b, err = p.Alloc(40<<20, 0)
	require.NoError(t, err, "the cache goes once the hold ends")
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Close())
}
