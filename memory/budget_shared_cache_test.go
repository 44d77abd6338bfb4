package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// sharedCacheCases are the device budgets of the tests below: with
// expandable segments the 3 MiB allocation takes 3 MiB of a 4 MiB budget,
// with classic ones a 20 MiB segment of a 21 MiB budget; either fits only
// once the managed tier's cached 2 MiB are released.
var sharedCacheCases = map[string]struct {
	mode         memory.SegmentMode
	limit, needs int64
}{
	"expandable": {memory.SegmentsExpandable, 4 << 20, 3 << 20},
	"classic":    {memory.SegmentsClassic, 21 << 20, memory.LargeBuffer},
}

// managerWithCachedManaged is a host manager whose managed tier caches a
// fully free segment (2 MiB) that counts against a device budget of limit.
func managerWithCachedManaged(t *testing.T, mode memory.SegmentMode, limit int64) *memory.Manager {
	t.Helper()
	m := memory.NewHostManager(memory.Config{Segments: mode})
	e, err := m.Alloc(1000, memory.RoleEmbedding) // the hybrid policy places embeddings in managed memory
	require.NoError(t, err)
	require.Equal(t, memory.TierManaged, e.Tier())
	require.NoError(t, e.Free())
	require.NoError(t, m.SetLimit(memory.TierDevice, limit))
	require.Positive(t, m.Stats().Tiers[memory.TierManaged].Reserved.Current, "the managed tier caches its segment")
	return m
}

// TestHoldReleasesTheManagedCache: Hold must fail only when the budget has
// no room even after the cached segments counted against it are released,
// the managed tier's included (it failed: "2.00 MiB of its 4.00 MiB limit
// is held", all of it a free managed segment).
func TestHoldReleasesTheManagedCache(t *testing.T) {
	for name, c := range sharedCacheCases {
		t.Run(name, func(t *testing.T) {
			m := managerWithCachedManaged(t, c.mode, c.limit)
			defer m.Close()
			release, err := m.Hold(memory.TierDevice, c.needs)
			require.NoError(t, err)
			release()
			assert.Zero(t, m.Stats().Tiers[memory.TierManaged].Reserved.Current)
		})
	}
}

// TestDeviceAllocReleasesTheManagedCacheBeforeSpilling: an allocation the
// device budget refuses spills only when releasing every cache counted
// against the budget leaves no room (it spilled to offload, though after
// EmptyCache the same allocation landed on the device).
func TestDeviceAllocReleasesTheManagedCacheBeforeSpilling(t *testing.T) {
	for name, c := range sharedCacheCases {
		t.Run(name, func(t *testing.T) {
			m := managerWithCachedManaged(t, c.mode, c.limit)
			defer m.Close()
			a, err := m.Alloc(3<<20, memory.RoleParameter)
			require.NoError(t, err)
			assert.Equal(t, memory.TierDevice, a.Tier())
			assert.Zero(t, m.Stats().Spills.Count)
			require.NoError(t, a.Free())
		})
	}
}
