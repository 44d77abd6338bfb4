package memory_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestStatsInactivePeakExpandableGrowth: an expandable segment that holds
// a live block grows by pages for the next allocation. The pages mapped
// for the block are taken by it in the same call, so InactiveSplit's peak
// must not count them as free bytes: it stays the highest value the pool
// was seen with (1 MiB), not 5 MiB. (Written by a reviewer helper: the
// pages raised the peak while free, before the block took them.)
func TestStatsInactivePeakExpandableGrowth(t *testing.T) {
	p := memory.NewPool(memory.NewHostBackend(memory.TierDevice), memory.PoolConfig{Expandable: true})
	a, err := p.Alloc(1*MiB, 1)
	require.NoError(t, err)
	require.Equal(t, memory.Stat{Current: 1 * MiB, Peak: 1 * MiB}, p.Stats().InactiveSplit, "the first page's rest")
	b, err := p.Alloc(4*MiB, 1)
	require.NoError(t, err)
	st := p.Stats()
	require.Equal(t, 6*MiB, st.Reserved.Current, "three pages mapped")
	require.Equal(t, memory.Stat{Current: 1 * MiB, Peak: 1 * MiB}, st.InactiveSplit,
		"the two pages mapped for the 4 MiB block were never free")
	require.NoError(t, p.Free(a))
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Close())
}

// TestStatsPeaksFollowCurrentsExpandable is TestStatsPeaksFollowCurrents
// over expandable segments on the host's virtual memory, with EmptyCache
// among the calls: every peak is the highest current value seen after a
// call since the last reset.
func TestStatsPeaksFollowCurrentsExpandable(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p := memory.NewPool(memory.NewHostBackend(memory.TierDevice), memory.PoolConfig{Expandable: true})
			live := statsPeaksRandom(t, p, rand.New(rand.NewPCG(seed, 0x57a76)), 1500, true)
			for _, b := range live {
				require.NoError(t, p.Free(b))
			}
			require.NoError(t, p.Close())
		})
	}
}
