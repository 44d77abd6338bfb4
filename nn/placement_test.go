package nn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// fakeWorld is a model of a training run under a budget, for Placement:
// at each checkpointing level a step needs some device memory, some of
// which the scheduler must keep offloaded, and takes some time. Like the
// real scheduler, it takes a step to demote and waits out a patience of
// steps before promoting (the plans say so: Demoted, Pending, Promoted).
type fakeWorld struct {
	ckpt     *Checkpointing
	clock    time.Time
	excess   map[int]int64         // level: bytes over the budget after demotions
	until    int                   // the excess lasts this many steps (0: for ever)
	offload  map[int]int64         // level: bytes that must stay offloaded
	stepTime func(lv, off int) int // ms a step at level lv with off bytes offloaded
	off      int64                 // bytes offloaded now
	waited   int
	steps    int
	err      error
}

func (w *fakeWorld) level() int {
	for i, l := range CheckpointLevels {
		if l.sameLevel(*w.ckpt) {
			return i
		}
	}
	return -1
}

// run advances the clock by a step at the current level.
func (w *fakeWorld) run() {
	w.clock = w.clock.Add(time.Duration(w.stepTime(w.level(), int(w.off))) * time.Millisecond)
}

func (w *fakeWorld) Step() (memory.Plan, error) {
	if w.err != nil {
		return memory.Plan{}, w.err
	}
	w.steps++
	lv := w.level()
	p := memory.Plan{Step: w.steps, Budget: 1 << 30}
	if w.until == 0 || w.steps <= w.until {
		p.Excess = w.excess[lv]
	}
	need := w.offload[lv]
	switch {
	case w.off < need:
		p.Demoted, w.off, w.waited = need-w.off, need, 0
	case w.off > need && w.waited < 2:
		w.waited++
		p.Pending = w.off - need
	case w.off > need:
		p.Promoted, w.off, w.waited = w.off-need, need, 0
	}
	if w.off > 0 {
		p.Entries = []memory.PlanEntry{{Label: "exp_avg", Role: memory.RoleOptimizerState, Bytes: w.off, Touches: 1, Tier: memory.TierOffload}}
	}
	return p, nil
}

func newFakePlacement(t *testing.T, w *fakeWorld, auto bool) (*Placement, *strings.Builder) {
	t.Helper()
	var log strings.Builder
	p, err := NewPlacement(w, w.ckpt, PlacementConfig{Auto: auto, Log: &log, Now: func() time.Time { return w.clock }})
	require.NoError(t, err)
	return p, &log
}

// train runs n steps, each followed by the placement's Step.
func train(t *testing.T, w *fakeWorld, p *Placement, n int) {
	t.Helper()
	for range n {
		w.run()
		_, err := p.Step()
		require.NoError(t, err)
	}
}

// decideWithin trains until the placement has decided, at most n steps.
func decideWithin(t *testing.T, w *fakeWorld, p *Placement, n int, log *strings.Builder) {
	t.Helper()
	for i := 0; i < n && !p.Decided(); i++ {
		train(t, w, p, 1)
	}
	require.True(t, p.Decided(), log.String())
}

func TestPlacementRaisesUntilTheStepFits(t *testing.T) {
	ckpt := &Checkpointing{}
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{0: 3 << 30, 1: 1 << 30}, stepTime: func(lv, off int) int { return 100 + 10*lv }}
	p, log := newFakePlacement(t, w, true)
	train(t, w, p, 2)
	require.Equal(t, CheckpointLevels[1], *ckpt, "the first step at level 1 is not judged")
	require.Contains(t, log.String(), "judged by the next")
	train(t, w, p, 1)
	require.Equal(t, CheckpointLevels[2], *ckpt, "raised twice: levels 0 and 1 passed the budget")
	require.Contains(t, log.String(), "passes the budget by 1.00 GiB")
	// Nothing is offloaded at level 2: recomputing more cannot pay. Level
	// 1 is tried once (it was left in an unsettled step), does not fit,
	// and level 2 is back.
	decideWithin(t, w, p, 20, log)
	require.Equal(t, CheckpointLevels[2], *ckpt, log.String())
	require.Equal(t, 1, strings.Count(log.String(), "which recomputes less"), log.String())
	require.Equal(t, 120*time.Millisecond, p.StepTime())
	train(t, w, p, 10)
	require.Equal(t, CheckpointLevels[2], *ckpt)
}

func TestPlacementLowersWhatTheFirstStepsRaised(t *testing.T) {
	// The first two steps pass the budget at any level (spills, a pool
	// still growing); once settled, level 0 fits and is the fastest.
	ckpt := &Checkpointing{}
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{0: 1 << 30, 1: 1 << 30}, until: 2, stepTime: func(lv, off int) int { return 100 + 10*lv }}
	p, log := newFakePlacement(t, w, true)
	decideWithin(t, w, p, 40, log)
	require.Equal(t, CheckpointLevels[0], *ckpt, log.String())
	// Raised once (the second step, the first at level 1, is not judged),
	// then level 0 is tried and kept.
	require.Equal(t, 1, strings.Count(log.String(), "kept"), log.String())
	require.Equal(t, 100*time.Millisecond, p.StepTime())
}

func TestPlacementTradesTransferForRecomputation(t *testing.T) {
	// Level 1 fits with 1 GiB offloaded, at 40 ms of bus traffic a step;
	// level 2 frees room for all of it and costs 10 ms of recomputation:
	// level 2 is faster and kept; level 3 is never tried (nothing is
	// offloaded any more).
	ckpt := &Checkpointing{Mode: CheckpointSelective}
	w := &fakeWorld{ckpt: ckpt, offload: map[int]int64{1: 1 << 30},
		stepTime: func(lv, off int) int { return 100 + 10*lv + 40*off/(1<<30) }}
	p, log := newFakePlacement(t, w, true)
	decideWithin(t, w, p, 30, log)
	require.Equal(t, CheckpointLevels[2], *ckpt, log.String())
	require.Contains(t, log.String(), "1.00 GiB a step cross the bus")
	require.Contains(t, log.String(), "kept")
	require.EqualValues(t, 0, w.off, "the scheduler promoted the offloaded state back")
	require.Equal(t, 120*time.Millisecond, p.StepTime())
}

func TestPlacementKeepsOffloadWhenRecomputingIsSlower(t *testing.T) {
	// The bus costs 5 ms a step, the next level's recomputation 30: the
	// trial is undone and the search ends at level 1, with the state
	// offloaded again.
	ckpt := &Checkpointing{Mode: CheckpointSelective}
	w := &fakeWorld{ckpt: ckpt, offload: map[int]int64{1: 1 << 30},
		stepTime: func(lv, off int) int { return 100 + 30*lv + 5*off/(1<<30) }}
	p, log := newFakePlacement(t, w, true)
	decideWithin(t, w, p, 30, log)
	require.Equal(t, CheckpointLevels[1], *ckpt, log.String())
	require.Contains(t, log.String(), "back to selective")
	train(t, w, p, 10) // decided: no more trials
	require.Equal(t, CheckpointLevels[1], *ckpt)
	require.EqualValues(t, 1<<30, w.off)
	require.Equal(t, 1, strings.Count(log.String(), "trying"), log.String())
}

func TestPlacementGivesUpAtTheHighestLevel(t *testing.T) {
	last := len(CheckpointLevels) - 1
	ckpt := new(CheckpointLevels[last])
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{last: 1 << 20}, stepTime: func(lv, off int) int { return 10 }}
	p, log := newFakePlacement(t, w, true)
	train(t, w, p, 5)
	require.True(t, p.Decided())
	require.Equal(t, 1, strings.Count(log.String(), "may spill"), log.String())
}

func TestPlacementWithoutAutoOnlyRunsTheScheduler(t *testing.T) {
	ckpt := &Checkpointing{}
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{0: 1 << 30}, offload: map[int]int64{0: 1 << 20}, stepTime: func(lv, off int) int { return 10 }}
	p, log := newFakePlacement(t, w, false)
	train(t, w, p, 8)
	require.Equal(t, Checkpointing{}, *ckpt)
	require.True(t, p.Decided())
	require.Empty(t, log.String())
	require.Equal(t, 8, w.steps)
}

func TestPlacementLeavesCustomCheckpointingAlone(t *testing.T) {
	ckpt := &Checkpointing{Mode: CheckpointBlocks, Every: 3}
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{-1: 1 << 30}, stepTime: func(lv, off int) int { return 10 }}
	p, _ := newFakePlacement(t, w, true)
	train(t, w, p, 4)
	require.Equal(t, Checkpointing{Mode: CheckpointBlocks, Every: 3}, *ckpt)
	require.True(t, p.Decided())
}

func TestPlacementErrors(t *testing.T) {
	_, err := NewPlacement(nil, &Checkpointing{}, PlacementConfig{})
	require.ErrorContains(t, err, "scheduler")
	_, err = NewPlacement(&fakeWorld{}, nil, PlacementConfig{})
	require.ErrorContains(t, err, "checkpointing")
	_, err = NewPlacement(&fakeWorld{}, &Checkpointing{}, PlacementConfig{Tolerance: 1})
	require.ErrorContains(t, err, "tolerance")
	boom := errors.New("boom")
	w := &fakeWorld{ckpt: &Checkpointing{}, err: boom, stepTime: func(lv, off int) int { return 1 }}
	p, _ := newFakePlacement(t, w, true)
	_, err = p.Step()
	require.ErrorIs(t, err, boom)
}
