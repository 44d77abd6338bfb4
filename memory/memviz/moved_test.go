package memviz

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// movedScan is the definition movedReleases follows: from event i on, the
// first later event of its tier that is neither a mark nor a release.
func movedScan(evs []memory.Event, i int) bool {
	e := &evs[i]
	if e.Kind != memory.EventRelease || e.Size == 0 {
		return false
	}
	for j := i + 1; j < len(evs); j++ {
		switch n := &evs[j]; {
		case n.Tier != e.Tier || n.Kind == memory.EventMark, n.Kind == memory.EventRelease:
			continue
		default:
			return n.Kind == memory.EventReserve && n.Size > 0
		}
	}
	return false
}

// TestMovedReleasesMatchesScan: the backward pass marks the same releases
// as the scan, on histories of every kind of event over a few tiers
// (empty reservations and releases included).
func TestMovedReleasesMatchesScan(t *testing.T) {
	kinds := []memory.EventKind{memory.EventAlloc, memory.EventFree, memory.EventReserve, memory.EventRelease, memory.EventMark}
	var marked int
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		evs := make([]memory.Event, r.IntN(60))
		for i := range evs {
			evs[i] = memory.Event{Kind: kinds[r.IntN(len(kinds))], Tier: memory.Tier(r.IntN(3)), Size: int64(r.IntN(3))}
		}
		got := movedReleases(evs)
		require.Len(t, got, len(evs))
		for i := range evs {
			require.Equal(t, movedScan(evs, i), got[i], "seed %d, event %d", seed, i)
			if got[i] {
				marked++
			}
		}
	}
	assert.Greater(t, marked, 100, "the histories move pages")
}

// TestMovedReleasesLongQuietTier: a tier that releases memory and then
// goes quiet while the history goes on made both writers scan, for every
// release, to the end of the history: 2^17 releases followed by 2^20
// events (marks, and allocations of another tier) were some 1.4e11 steps,
// minutes, where one pass over the events takes milliseconds. The
// deadline is far above the pass and far below the scans.
func TestMovedReleasesLongQuietTier(t *testing.T) {
	const releases, tail = 1 << 17, 1 << 20
	h := &memory.History{}
	h.Before[memory.TierHost].Reserved = releases << 20
	evs := make([]memory.Event, 0, releases+tail)
	for range releases {
		evs = append(evs, memory.Event{Kind: memory.EventRelease, Tier: memory.TierHost, Size: 1 << 20})
	}
	for i := range tail {
		e := memory.Event{Kind: memory.EventMark, Op: "step"}
		if i%16 == 0 {
			e = memory.Event{Kind: memory.EventAlloc, Tier: memory.TierDevice, Role: memory.RoleActivation, Size: 512, Block: 512}
			if i%32 == 16 {
				e.Kind = memory.EventFree
			}
		}
		evs = append(evs, e)
	}
	for i := range evs {
		evs[i].Seq, evs[i].Time = uint64(i), int64(i)
	}
	h.Events = evs
	done := make(chan [memory.NumTiers][]sample, 1)
	go func() {
		samples, _ := tierSamples(h, 2000, false)
		appendCounters(nil, h, usedTiers(h))
		done <- samples
	}()
	select {
	case samples := <-done:
		host := samples[memory.TierHost]
		require.NotEmpty(t, host)
		assert.Zero(t, host[len(host)-1].reserved, "every release counts")
	case <-time.After(30 * time.Second):
		t.Fatal("the writers' replay of 2^17 releases and 2^20 later events took over 30 s")
	}
}
