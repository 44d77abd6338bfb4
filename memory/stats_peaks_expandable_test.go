package memory_test

import (
	"fmt"
	"math"
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
// over expandable segments on the host's virtual memory: every peak is the
// highest current value seen after a call since the last reset.
func TestStatsPeaksFollowCurrentsExpandable(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x57a76))
			p := memory.NewPool(memory.NewHostBackend(memory.TierDevice), memory.PoolConfig{Expandable: true})
			var peaks [5]int64
			var live []*memory.Block
			lo, hi := math.Log(512), math.Log(24<<20)
			for step := range 1500 {
				switch r := rng.IntN(100); {
				case r < 50 || len(live) == 0:
					size := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
					live = append(live, mustAlloc(t, p, size, memory.Stream(1+rng.IntN(2))))
				case r < 97:
					i := rng.IntN(len(live))
					require.NoError(t, p.Free(live[i]))
					live[i] = live[len(live)-1]
					live = live[:len(live)-1]
				case r < 98:
					require.NoError(t, p.EmptyCache())
				default:
					p.ResetPeaks()
					peaks = [5]int64{}
				}
				st := p.Stats()
				a, req, act, in, res := usageFromSegments(p)
				got := [5]memory.Stat{st.Allocated, st.Requested, st.Active, st.InactiveSplit, st.Reserved}
				want := [5]int64{a, req, act, in, res}
				for k, name := range []string{"allocated", "requested", "active", "inactive split", "reserved"} {
					peaks[k] = max(peaks[k], want[k])
					require.Equal(t, want[k], got[k].Current, "step %d: %s", step, name)
					require.Equal(t, peaks[k], got[k].Peak, "step %d: %s peak", step, name)
				}
			}
			for _, b := range live {
				require.NoError(t, p.Free(b))
			}
			require.NoError(t, p.Close())
		})
	}
}
