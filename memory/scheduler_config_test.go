package memory_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestNewSchedulerRefusesContradictorySettings: a tensor touched 3 times
// a step was both hot (> HotTouches 1) and cold (<= ColdTouches 5);
// infinite and NaN thresholds were taken too.
func TestNewSchedulerRefusesContradictorySettings(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	for name, c := range map[string]struct {
		cfg  memory.SchedulerConfig
		want string
	}{
		"cold above hot":    {memory.SchedulerConfig{HotTouches: 1, ColdTouches: 5}, "ColdTouches"},
		"cold infinite":     {memory.SchedulerConfig{ColdTouches: math.Inf(1)}, "ColdTouches"},
		"hot infinite":      {memory.SchedulerConfig{HotTouches: math.Inf(1)}, "HotTouches"},
		"cold NaN":          {memory.SchedulerConfig{ColdTouches: math.NaN()}, "ColdTouches"},
		"cold negative":     {memory.SchedulerConfig{ColdTouches: -1}, "ColdTouches"},
		"hot negative":      {memory.SchedulerConfig{HotTouches: -2}, "HotTouches"},
		"margin NaN":        {memory.SchedulerConfig{Margin: math.NaN()}, "Margin"},
		"decay one":         {memory.SchedulerConfig{Decay: 1}, "Decay"},
		"negative budget":   {memory.SchedulerConfig{Budget: -1}, "Budget"},
		"negative patience": {memory.SchedulerConfig{Patience: -1}, "Patience"},
		"negative minbytes": {memory.SchedulerConfig{MinBytes: -1}, "MinBytes"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := m.NewScheduler(c.cfg)
			require.ErrorIs(t, err, memory.ErrInvalidArgument)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	s, err := m.NewScheduler(memory.SchedulerConfig{HotTouches: 5, ColdTouches: 5})
	require.NoError(t, err, "equal thresholds split the tensors, they do not overlap")
	s.Close()
}

// TestSchedulerStepAfterReplacementOrClose: a replaced scheduler's Step
// returned plans with a nil error, and a closed one's an empty plan and
// nil: both are errors now.
func TestSchedulerStepAfterReplacementOrClose(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	first, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	_, err = first.Step()
	require.NoError(t, err)
	second, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	_, err = first.Step()
	require.ErrorIs(t, err, memory.ErrClosed)
	assert.Contains(t, err.Error(), "replaced")
	a, err := m.Alloc(2<<20, memory.RoleParameter)
	require.NoError(t, err)
	require.ErrorIs(t, first.Track(a), memory.ErrClosed)
	_, err = second.Step()
	require.NoError(t, err)
	second.Close()
	_, err = second.Step()
	require.ErrorIs(t, err, memory.ErrClosed)
	assert.Contains(t, err.Error(), "closed")
	require.ErrorIs(t, second.Track(a), memory.ErrClosed)
	second.Close() // twice: nothing
	require.NoError(t, a.Free())
}
