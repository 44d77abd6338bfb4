package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestManagerEmptyCacheClosedPool: a pool of a manager closed on its own
// (Pool.Close) holds nothing, so the manager's EmptyCache and
// EmptyStreamCache skip it and empty the others, the device limit's
// release of the managed tier's cache passes over a closed managed pool,
// and the manager's Close still closes the rest. No call fails or panics.
func TestManagerEmptyCacheClosedPool(t *testing.T) {
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		for _, closed := range []memory.Tier{memory.TierDevice, memory.TierManaged} {
			cfg := memory.Config{Segments: seg, PlanSteps: memory.PlanNone}
			cfg.Limits[memory.TierDevice] = 4 << 20
			m := memory.NewHostManager(cfg)
			for _, r := range []memory.Role{memory.RoleActivation, memory.RoleEmbedding, memory.RoleOther} {
				a, err := m.Alloc(1<<20, r)
				require.NoError(t, err)
				require.NoError(t, a.Free())
			}
			require.NoError(t, m.Pool(closed).Close())
			require.NotPanics(t, func() {
				require.NoError(t, m.EmptyCache(), "segments %d, %s closed", seg, closed)
				require.NoError(t, m.EmptyStreamCache(0))
				require.NoError(t, m.SetLimit(memory.TierDevice, 2<<20))
			})
			st := m.Stats()
			for t2, u := range st.Tiers {
				require.Zero(t, u.Reserved.Current, "tier %s emptied", memory.Tier(t2))
			}
			require.NoError(t, m.Close())
		}
	}
}

// TestManagerFreeClosedPool: an allocation whose pool was closed on its
// own (its block released as leaked) is freed with ErrClosed, as a
// block of that pool is, not reported as a double free. Before, the
// dead block read as freed behind the manager's back (ErrDoubleFree).
func TestManagerFreeClosedPool(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a, err := m.Alloc(1<<20, memory.RoleActivation)
	require.NoError(t, err)
	require.ErrorIs(t, m.Pool(a.Tier()).Close(), memory.ErrLeaked)
	err = a.Free()
	require.ErrorIs(t, err, memory.ErrClosed)
	require.NotErrorIs(t, err, memory.ErrDoubleFree)
	require.ErrorIs(t, m.Close(), memory.ErrLeaked, "the allocation is still reported")
}

// TestManagerMigrateClosedPool: an allocation whose pool was closed on
// its own has a dead block, so Migrate, MigrateOn, RecordStream and
// Prefetch refuse it with ErrClosed, as Free does. Before, Migrate
// copied from address 0 (the dead block's) into a new block of the
// other tier and moved the allocation there.
func TestManagerMigrateClosedPool(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a, err := m.Alloc(1<<20, memory.RoleActivation)
	require.NoError(t, err)
	copies := 0
	m.SetCopy(func(dst, src uintptr, n int64, s memory.Stream) error { copies++; return nil })
	require.ErrorIs(t, m.Pool(a.Tier()).Close(), memory.ErrLeaked)
	require.ErrorIs(t, m.Migrate(a, memory.TierOffload), memory.ErrClosed)
	require.ErrorIs(t, m.MigrateOn(a, memory.TierOffload, 0), memory.ErrClosed)
	require.ErrorIs(t, m.RecordStream(a, 0), memory.ErrClosed)
	require.ErrorIs(t, m.Prefetch(a, 0), memory.ErrClosed)
	require.Zero(t, copies, "nothing copied from the dead block")
	require.Equal(t, memory.TierDevice, a.Tier())
	require.Zero(t, m.Stats().Migrations.Count)
	require.ErrorIs(t, m.Close(), memory.ErrLeaked)
}
