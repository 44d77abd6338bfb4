package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestSchedulerMovedCountsFromItsStart: a Plan's Moved is what MigrateOn
// moved since the last Step, or, for a scheduler's first Step, since the
// scheduler was made: the moves before it (of a scheduler it replaced, or
// of steps run without one) are no traffic of its steps. Before, the
// first Step reported every byte MigrateOn had moved since the manager
// was made, and Plan.OffloadTraffic with it.
func TestSchedulerMovedCountsFromItsStart(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	defer func() { require.NoError(t, m.Close()) }()
	a, err := m.AllocStream(300*KiB, memory.RoleActivation, 1)
	require.NoError(t, err)
	require.NoError(t, m.MigrateOn(a, memory.TierOffload, 2)) // before the scheduler

	first, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	plan, err := first.Step()
	require.NoError(t, err)
	assert.Zero(t, plan.Moved, "nothing moved since the scheduler was made")

	require.NoError(t, m.MigrateOn(a, memory.TierDevice, 2)) // the first scheduler's step
	sched, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	require.NoError(t, m.MigrateOn(a, memory.TierOffload, 2)) // the replacement's
	plan, err = sched.Step()
	require.NoError(t, err)
	assert.Equal(t, 300*KiB, plan.Moved, "only the moves since the replacement was made")
	assert.Equal(t, 300*KiB, plan.OffloadTraffic())
	require.NoError(t, a.Free())
	ss.CompleteAll()
}
