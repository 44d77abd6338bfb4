package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestSchedulerPeakCountsMovesIn: a Plan's Demand is the step's device
// peak, and a move into the device tier (Migrate, MigrateOn) raises it as
// an allocation does. Before, only allocations raised the peak: a high
// reached by a move and followed only by frees was missing from the
// plan's Demand.
func TestSchedulerPeakCountsMovesIn(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	defer s.Close()
	held := mustManagerAlloc(t, m, 2*MiB, memory.RoleActivation)
	for _, move := range []func(a *memory.Allocation) error{
		func(a *memory.Allocation) error { return m.Migrate(a, memory.TierDevice) },
		func(a *memory.Allocation) error { return m.MigrateOn(a, memory.TierDevice, 2) },
	} {
		a := mustManagerAlloc(t, m, 4*MiB, memory.RoleActivation)
		require.NoError(t, m.Migrate(a, memory.TierOffload))
		_, err := s.Step() // the next window starts with 2 MiB on the device
		require.NoError(t, err)
		require.NoError(t, move(a)) // 6 MiB
		require.NoError(t, a.Free())
		ss.CompleteAll()
		p, err := s.Step()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, p.Demand, int64(6*MiB), "the high the move reached")
	}
	require.NoError(t, held.Free())
}
