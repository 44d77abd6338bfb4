package memory

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// churnWorkload replaces one of live slots with a block of a log-uniform
// size from 512 B to max bytes, n times, drawing from rng.
func churnWorkload(t *testing.T, p *Pool, blocks []*Block, rng *rand.Rand, n int, max float64) {
	lo, hi := math.Log(512), math.Log(max)
	for range n {
		s := rng.IntN(len(blocks))
		if blocks[s] != nil {
			require.NoError(t, p.Free(blocks[s]))
		}
		b, err := p.Alloc(int64(math.Exp(lo+rng.Float64()*(hi-lo))), 0)
		require.NoError(t, err)
		blocks[s] = b
	}
}

func TestExpandableChurnEarnsSlack(t *testing.T) {
	p := NewPool(newHostBackend(TierHost, "host"), PoolConfig{Expandable: true})
	defer func() { require.NoError(t, p.Close()) }()
	blocks := make([]*Block, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	const phase = (churnStreak + 3) * (1 << 16)
	churnWorkload(t, p, blocks, rng, phase, 32<<20)
	mid := p.Stats()
	first := mid.PagesMapped
	churnWorkload(t, p, blocks, rng, phase, 32<<20)
	last := p.Stats().PagesMapped - first
	st := p.Stats()
	for _, b := range blocks {
		require.NoError(t, p.Free(b))
	}

	assert.Positive(t, p.churnState.slack, "a workload that never repeats keeps stealing: it earns slack")
	assert.LessOrEqual(t, p.churnState.slack, churnMax)
	// Without the slack the second phase maps about as many pages as the
	// first (0.005 a pair); with it, a fraction.
	assert.Less(t, float64(last), float64(first)/4, "pages mapped: %d in the first phase, %d in the second", first, last)
	assert.Less(t, float64(last)/phase, 0.001, "pages mapped a pair in the second phase")
	// Memory for speed, bounded: at most the slack's share of the peak
	// allocated bytes above it (and a page per pool kind).
	bound := float64(st.Allocated.Peak)*(1+churnMax) + float64(2*HostPageSize)
	assert.LessOrEqual(t, float64(st.Reserved.Peak), bound)
	assert.Greater(t, st.Reserved.Peak, mid.Reserved.Peak, "the slack is memory")
	checkExpandable(t, p)
}

func TestExpandableRepeatingStepsKeepNoSlack(t *testing.T) {
	p := NewPool(newHostBackend(TierHost, "host"), PoolConfig{Expandable: true})
	defer func() { require.NoError(t, p.Close()) }()
	// A step: the mixed workload's first 3,000 replacements from one seed,
	// then every block freed; the same step again and again, for several
	// windows. Its first steps steal (the pages of freed blocks are moved
	// where larger requests go), then every request finds a cached block.
	step := func() {
		blocks := make([]*Block, 64)
		churnWorkload(t, p, blocks, rand.New(rand.NewPCG(3, 4)), 3000, 8<<20)
		for _, b := range blocks {
			if b != nil {
				require.NoError(t, p.Free(b))
			}
		}
	}
	step()
	first := p.Stats().PagesMapped
	step()
	step()
	warm, reserved := p.Stats().PagesMapped, p.Stats().Reserved.Peak
	require.Positive(t, first)
	for range (churnStreak + 3) * (1 << 16) / 3000 {
		step()
	}
	t.Logf("pages mapped: %d in the first step, %d after three, %d after %d", first, warm, p.Stats().PagesMapped, 3+(churnStreak+3)*(1<<16)/3000)
	t.Logf("churn %+v allocs %d", p.churnState, p.sinks.own.Allocs)
	assert.Zero(t, p.churnState.slack, "a repeating step does not churn")
	assert.Equal(t, reserved, p.Stats().Reserved.Peak, "the repeating steps held no more than the first three")
	checkExpandable(t, p)
}

// TestExpandableSlackNotForHeldNorShared checks two bounds of the slack:
// a held stream (a graph's private pool growing in its capture) takes none,
// lending its own free pages instead, since pages created for it stay its
// own until it is released; and bytes that share the pool's Limit from
// elsewhere (Hold, a manager's managed tier) do not eat it, as it is a
// share of the pool's own peak.
func TestExpandableSlackNotForHeldNorShared(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		ss := &holdingSync{newLateSync(), 3}
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, StreamSync: ss})
		defer func() { require.NoError(t, p.Close()) }()
		// Another stream's 64 MiB raise the peak allocated bytes, so the
		// slack would leave room for every page the held stream needs.
		o, err := p.Alloc(64<<20, 1)
		require.NoError(t, err)
		a, err := p.Alloc(8<<20, ss.held)
		require.NoError(t, err)
		b, err := p.Alloc(8<<20, ss.held)
		require.NoError(t, err)
		require.NoError(t, p.Free(a))
		require.NoError(t, p.Free(o))
		p.churnState.slack = churnMax
		created := p.Stats().BackendAllocs
		// 12 MiB do not fit the 8 MiB freed: the range needs 6 pages, 4
		// of which the freed block lends.
		c, err := p.Alloc(12<<20, ss.held)
		require.NoError(t, err)
		assert.Equal(t, int64(2), p.Stats().BackendAllocs-created, "pages created for the held stream: only those lending could not give")
		require.NoError(t, p.Free(b))
		require.NoError(t, p.Free(c))
		checkExpandable(t, p)
	})
	t.Run("shared", func(t *testing.T) {
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true})
		defer func() { require.NoError(t, p.Close()) }()
		a, err := p.Alloc(64<<20, 0)
		require.NoError(t, err)
		require.NoError(t, p.Free(a))
		p.churnState.slack = 1.0 / 8
		p.external = 1 << 30 // held against the limit elsewhere
		p.mu.Lock()
		room := p.churnRoom(100)
		p.mu.Unlock()
		// 64 MiB peak, 64 MiB reserved: the slack leaves 8 MiB, 4 pages.
		assert.Equal(t, 4, room)
	})
}
