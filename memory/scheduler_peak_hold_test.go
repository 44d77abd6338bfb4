package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestSchedulerPeakCountsHolds: bytes held outside the pools (Hold) are
// part of a Plan's Demand, and a Hold raises the step's peak as an
// allocation does. Before, only allocations and moves raised it: a Hold
// taken and given back between two Steps was missing from the plan.
func TestSchedulerPeakCountsHolds(t *testing.T) {
	m := memory.NewHostManager(memory.Config{StreamSync: memtest.NewStreamSync()})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	defer s.Close()
	a := mustManagerAlloc(t, m, 2*MiB, memory.RoleActivation)
	_, err = s.Step()
	require.NoError(t, err)
	release, err := m.Hold(memory.TierDevice, 4*MiB) // 6 MiB
	require.NoError(t, err)
	release()
	p, err := s.Step()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, p.Demand, int64(6*MiB), "the high the hold reached")
	require.NoError(t, a.Free())
}
