package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestNilAllocationMethodsAreSafe: Free on a nil *Allocation returns
// ErrDoubleFree, but Addr and the other methods panicked; they return
// zero values (or errors) instead.
func TestNilAllocationMethodsAreSafe(t *testing.T) {
	var a *memory.Allocation
	require.NotPanics(t, func() {
		assert.Zero(t, a.Addr())
		assert.Nil(t, a.Host())
		assert.Zero(t, a.Size())
		assert.Nil(t, a.Manager())
		assert.Zero(t, a.Stream())
		assert.Empty(t, a.Op())
		assert.Zero(t, a.Role())
		assert.Zero(t, a.Tier())
		assert.Zero(t, a.Advice())
		a.Touch()
		assert.Zero(t, a.Touches())
		a.SetLabel("x")
		assert.Empty(t, a.Label())
		assert.ErrorIs(t, a.Free(), memory.ErrDoubleFree)
	})
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	require.NotPanics(t, func() {
		assert.ErrorIs(t, m.Free(a), memory.ErrInvalidArgument)
		assert.ErrorIs(t, m.Migrate(a, memory.TierOffload), memory.ErrInvalidArgument)
		assert.ErrorIs(t, m.MigrateOn(a, memory.TierOffload, 0), memory.ErrInvalidArgument)
		assert.ErrorIs(t, m.Prefetch(a, 0), memory.ErrInvalidArgument)
		assert.ErrorIs(t, m.RecordStream(a, 0), memory.ErrInvalidArgument)
	})
	s, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	defer s.Close()
	require.NotPanics(t, func() { assert.ErrorIs(t, s.Track(a), memory.ErrInvalidArgument) })
}
