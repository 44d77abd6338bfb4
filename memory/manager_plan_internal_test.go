package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Config.PlanSteps chooses the expandable pools that plan: by default
// none in a host manager (STRATA_PLAN_STEPS=1: the device tier's; a CUDA
// manager's device tier plans unless it is 0: planCUDADefault), PlanNone none,
// PlanDevice the device tier's, PlanAll every one; classic segments plan
// nothing, and a bad value of the variable is refused naming it.
func TestManagerPlanSteps(t *testing.T) {
	planned := func(cfg Config, tier Tier) bool {
		m := NewHostManager(cfg)
		defer func() { require.NoError(t, m.Close()) }()
		return m.pools[tier].planner != nil
	}
	t.Setenv(EnvPlanSteps, "")
	require.False(t, planned(Config{Segments: SegmentsExpandable}, TierDevice), "a host manager: off by default")
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: planCUDADefault}, TierDevice), "a CUDA manager's device tier by default")
	require.False(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: planCUDADefault}, TierHost))
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanDevice}, TierDevice))
	require.False(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanDevice}, TierHost), "the device tier's only")
	require.False(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanNone}, TierDevice))
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanAll}, TierHost))
	require.False(t, planned(Config{Segments: SegmentsClassic, PlanSteps: PlanAll}, TierDevice), "classic segments plan nothing")
	t.Setenv(EnvPlanSteps, "0")
	require.False(t, planned(Config{Segments: SegmentsExpandable}, TierDevice))
	require.False(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: planCUDADefault}, TierDevice), "off by the variable")
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanAll}, TierDevice), "the variable reads for PlanDefault only")
	t.Setenv(EnvPlanSteps, "1")
	require.True(t, planned(Config{Segments: SegmentsExpandable}, TierDevice))
	require.True(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: planCUDADefault}, TierDevice))
	require.False(t, planned(Config{Segments: SegmentsExpandable}, TierHost))
	require.False(t, planned(Config{Segments: SegmentsExpandable, PlanSteps: PlanNone}, TierDevice))
	t.Setenv(EnvPlanSteps, "bogus")
	err := Config{}.Validate()
	require.ErrorIs(t, Config{PlanSteps: 9}.Validate(), ErrInvalidArgument)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, EnvPlanSteps)

	// A manager that plans replays a repeated step as the pool does.
	t.Setenv(EnvPlanSteps, "")
	m := NewHostManager(Config{Segments: SegmentsExpandable, PlanSteps: PlanDevice})
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
