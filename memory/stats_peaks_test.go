package memory_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// usageFromSegments is what a pool's current statistics must be, counted
// from its segments: Allocated and Requested from live blocks, Active from
// live and pending ones, InactiveSplit the rest of every segment holding
// either, Reserved the mapped bytes.
func usageFromSegments(p *memory.Pool) (allocated, requested, active, inactive, reserved int64) {
	for _, s := range p.Segments() {
		var used int64
		for _, b := range s.Blocks {
			if b.Live {
				allocated += b.Size
				requested += b.Requested
			}
			if b.Live || b.Pending {
				used += b.Size
			}
		}
		active += used
		if used > 0 {
			inactive += s.Mapped - used
		}
		reserved += s.Mapped
	}
	return
}

// TestStatsPeaksFollowCurrents drives a pool at random (allocations of
// sizes from 512 B to 24 MiB, frees, peak resets) and checks after every
// call that each current value equals the one counted from the segments
// and each peak the highest current seen since the last reset. Active
// and InactiveSplit are derived from other sums on the allocation path
// (liveUsage); this pins them, and their peaks, to their definitions.
func TestStatsPeaksFollowCurrents(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			p, fb, ss := newSyncPool(t, memory.PoolConfig{})
			live := statsPeaksRandom(t, p, rand.New(rand.NewPCG(seed, 0x57a75)), 3000, false)
			for _, b := range live {
				require.NoError(t, p.Free(b))
			}
			closeSynced(t, p, fb, ss)
		})
	}
}

// statsPeaksRandom makes steps random calls on p (allocations of sizes
// from 512 B to 24 MiB on two streams, frees, peak resets, and with
// emptyCache EmptyCache now and then) and checks after each that every
// current value equals the one counted from the segments and every peak
// the highest current seen since the last reset. It returns the blocks
// still live.
func statsPeaksRandom(t *testing.T, p *memory.Pool, rng *rand.Rand, steps int, emptyCache bool) []*memory.Block {
	t.Helper()
	freeBelow := 98
	if emptyCache {
		freeBelow = 97
	}
	var peaks [5]int64
	var live []*memory.Block
	lo, hi := math.Log(512), math.Log(24<<20)
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 50 || len(live) == 0:
			size := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
			live = append(live, mustAlloc(t, p, size, memory.Stream(1+rng.IntN(2))))
		case r < freeBelow:
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
	return live
}

// TestStatsActivePeakWithPendingBlocks: blocks freed while other streams
// may still use them stay active, so Active's peak passes Allocated's when
// an allocation comes while they are pending, and the reclaim lowers
// Active and raises InactiveSplit.
func TestStatsActivePeakWithPendingBlocks(t *testing.T) {
	const s1, s2 = memory.Stream(1), memory.Stream(2)
	p, fb, ss := newSyncPool(t, memory.PoolConfig{})
	a := mustAlloc(t, p, 4*KiB, s1)
	require.NoError(t, p.RecordStream(a, s2))
	require.NoError(t, p.Free(a))
	b := mustAlloc(t, p, 8*KiB, s1)
	st := p.Stats()
	require.Equal(t, memory.Stat{Current: 8 * KiB, Peak: 8 * KiB}, st.Allocated)
	require.Equal(t, memory.Stat{Current: 12 * KiB, Peak: 12 * KiB}, st.Active, "the pending block and the new one")
	require.Equal(t, memory.Stat{Current: 2*MiB - 12*KiB, Peak: 2*MiB - 4*KiB}, st.InactiveSplit,
		"the peak came with the first block")

	p.ResetPeaks()
	st = p.Stats()
	require.Equal(t, memory.Stat{Current: 12 * KiB, Peak: 12 * KiB}, st.Active, "reset to the current value")
	require.Equal(t, memory.Stat{Current: 2*MiB - 12*KiB, Peak: 2*MiB - 12*KiB}, st.InactiveSplit)

	ss.Complete(s2)
	c := mustAlloc(t, p, 512, s1) // the pool reclaims the finished block first
	st = p.Stats()
	require.Equal(t, memory.Stat{Current: 8*KiB + 512, Peak: 12 * KiB}, st.Active)
	require.Equal(t, 8*KiB+512, st.Allocated.Current)
	require.Equal(t, memory.Stat{Current: 2*MiB - 8*KiB - 512, Peak: 2*MiB - 8*KiB}, st.InactiveSplit,
		"the reclaim raised it before the allocation took 512 bytes")
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(c))
	st = p.Stats()
	require.Zero(t, st.Active.Current)
	require.Zero(t, st.InactiveSplit.Current, "a segment with nothing in use is cache, not fragmentation")
	closeSynced(t, p, fb, ss)
}
