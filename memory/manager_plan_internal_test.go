package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Config.PlanSteps, or STRATA_PLAN_STEPS, gives a manager's expandable
// pools step plans; they are off by default, on classic segments, and a
// bad value of the variable is refused naming it.
func TestManagerPlanSteps(t *testing.T) {
	planned := func(cfg Config) bool {
		m := NewHostManager(cfg)
		defer func() { require.NoError(t, m.Close()) }()
		return m.pools[TierDevice].planner != nil
	}
	t.Setenv(EnvPlanSteps, "")
	require.False(t, planned(Config{Segments: SegmentsExpandable}), "off by default")
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: true}))
	require.False(t, planned(Config{Segments: SegmentsClassic, PlanSteps: true}), "classic segments plan nothing")
	t.Setenv(EnvPlanSteps, "1")
	require.True(t, planned(Config{Segments: SegmentsExpandable}))
	t.Setenv(EnvPlanSteps, "bogus")
	err := Config{}.Validate()
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, EnvPlanSteps)

	// A manager that plans replays a repeated step as the pool does.
	t.Setenv(EnvPlanSteps, "")
	m := NewHostManager(Config{Segments: SegmentsExpandable, PlanSteps: true})
	defer func() { require.NoError(t, m.Close()) }()
	for range 6 {
		var live []*Allocation
		for i := range 300 {
			a, err := m.Alloc(int64(1+i%7)<<20, RoleActivation)
			require.NoError(t, err)
			live = append(live, a)
			if i%3 == 2 {
				require.NoError(t, live[0].Free())
				live = live[1:]
			}
		}
		for _, a := range live {
			require.NoError(t, a.Free())
		}
	}
	require.Positive(t, m.pools[TierDevice].planner.plans, "the steps were planned")
}
