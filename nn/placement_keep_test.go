package nn

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
)

// keepWorld is a step under a budget whose device demand grows by a
// region's bytes for each region kept, and whose time is stepMS(keep): the
// plan and the clock Placement's tuneKeep reads.
type keepWorld struct {
	ckpt                   *Checkpointing
	base, per, target, cap int64 // demand with none kept, a region's bytes, the target; cap: the budget's real edge (0: target)
	demote                 int64 // bytes the scheduler demotes in the second step
	stepMS                 func(keep int) int
	steps                  int
	clock                  time.Time
}

func (w *keepWorld) Step() (memory.Plan, error) {
	w.steps++
	k := w.ckpt.offloadKeep()
	if w.ckpt.wideKnob() {
		k = w.ckpt.keepWide(12)
	}
	d := w.base + int64(k)*w.per
	p := memory.Plan{Step: w.steps, Budget: w.target, Target: w.target, Demand: d}
	edge := w.target
	if w.cap > 0 {
		edge = w.cap
	}
	if d > edge {
		p.Excess = d - edge
	}
	if w.steps == 2 {
		p.Demoted = w.demote
	}
	return p, nil
}

// runKeep trains steps steps of w under a Placement over ck and returns
// the checkpointing it ends with and the placement's log.
func runKeep(t *testing.T, ck Checkpointing, w *keepWorld, regions func() (int, int64), steps int) (Checkpointing, string) {
	t.Helper()
	return runKeepCfg(t, ck, w, PlacementConfig{OffloadRegions: regions}, steps)
}

// runKeepCfg is runKeep with the placement's configuration given (its
// Log and Now are set here); the step time is w.stepMS of the keep that
// applies (the offload's, or KeepWide in the selective mode).
func runKeepCfg(t *testing.T, ck Checkpointing, w *keepWorld, cfg PlacementConfig, steps int) (Checkpointing, string) {
	t.Helper()
	var log strings.Builder
	w.ckpt = &ck
	if w.stepMS == nil {
		w.stepMS = func(int) int { return 100 }
	}
	cfg.Log, cfg.Now = &log, func() time.Time { return w.clock }
	p, err := NewPlacement(w, &ck, cfg)
	require.NoError(t, err)
	for range steps {
		k := ck.offloadKeep()
		if ck.wideKnob() {
			k = ck.keepWide(12)
		}
		w.clock = w.clock.Add(time.Duration(w.stepMS(k)) * time.Millisecond)
		_, err := p.Step()
		require.NoError(t, err)
	}
	return ck, log.String()
}

// Under a budget with room for more regions than the default two, the
// placement tries keeping more, half the room at a time, and stays with a
// larger keep only while its measured step is faster; over the budget, or
// when the scheduler demotes tensors, it keeps fewer at once.
func TestPlacementTunesOffloadKeep(t *testing.T) {
	const per = 100
	twelve := func() (int, int64) { return 12, per }
	off := Checkpointing{Mode: CheckpointSelective, Offload: true}
	roomy := func() *keepWorld { return &keepWorld{base: 1000, per: per, target: 1000 + 6*per + 50} }

	// Each block kept saves 5 ms: 2 -> 4 (190 -> 180 ms, kept) -> 5 (175:
	// less than the 3% tolerance) -> back to 4.
	w := roomy()
	w.stepMS = func(k int) int { return 200 - 5*k }
	ck, log := runKeep(t, off, w, twelve, 16)
	require.Equal(t, 4, ck.offloadKeep(), log)
	require.Contains(t, log, "step 4: 450 B of the target is free, a region holds 100 B, 190ms a step: offloading keeps the last 4 of 12 checkpointed blocks on the device (was 2)")
	require.Contains(t, log, "step 8: keeping 4 blocks takes 180ms a step, 2 took 190ms: kept")
	require.Contains(t, log, "step 12: keeping 5 blocks takes 175ms a step, 4 took 180ms: offloading keeps the last 4 of 12 checkpointed blocks on the device (was 5)")
	require.Equal(t, 4, strings.Count(log, "placement:"), log)

	// Keeping more is slower (the H200's gpt2 at 8 and 9): back to 2.
	w = roomy()
	w.stepMS = func(k int) int { return 150 + 10*k }
	ck, log = runKeep(t, off, w, twelve, 16)
	require.Equal(t, 2, ck.offloadKeep(), log)
	require.Equal(t, 2, strings.Count(log, "placement:"), "tried 4 once: %s", log)

	// The target says more fit, but the budget's edge passes at 7 kept:
	// down by the excess at once, no larger keep tried again.
	w = &keepWorld{base: 1000, per: per, target: 1000 + 13*per + 50, cap: 1000 + 6*per + 50}
	ck, log = runKeep(t, off, w, twelve, 20)
	require.Equal(t, 6, ck.offloadKeep(), log)
	require.Contains(t, log, "step 6: the step passed the budget by 50 B, a region holds 100 B: offloading keeps the last 6 of 12 checkpointed blocks on the device (was 7)")

	// The scheduler demoting tensors to make room is pressure too.
	ck, log = runKeep(t, Checkpointing{Mode: CheckpointSelective, Offload: true, OffloadKeep: 8}, &keepWorld{base: 1000, per: per, target: 2000, demote: 250}, twelve, 4)
	require.Equal(t, 5, ck.offloadKeep(), log)
	require.Contains(t, log, "step 2: the scheduler demoted 250 B to fit the budget, a region holds 100 B")

	// Far over the budget: none kept.
	ck, log = runKeep(t, off, &keepWorld{base: 1000, per: per, target: 1000 - 10*per}, twelve, 3)
	require.Equal(t, 0, ck.offloadKeep(), log)
	require.Equal(t, -1, ck.OffloadKeep, "none is negative")

	// Left alone: no OffloadRegions, no offloading, no pass seen yet.
	for _, c := range []struct {
		ck      Checkpointing
		regions func() (int, int64)
	}{{off, nil}, {Checkpointing{Mode: CheckpointSelective}, twelve}, {off, func() (int, int64) { return 0, 0 }}} {
		ck, log = runKeep(t, c.ck, &keepWorld{base: 1000, per: per, target: 1000 + 50*per}, c.regions, 8)
		require.Equal(t, c.ck, ck)
		require.Empty(t, log)
	}
}

// In the selective mode on the device, KeepWide is searched the same way
// once the level is decided: with room, more wide products are kept while
// that is faster (each saves a recomputation); the scheduler's pressure
// lowers it; without WideRegions, or while the level search runs, it is
// left alone.
func TestPlacementTunesKeepWide(t *testing.T) {
	const per = 100
	twelve := func() (int, int64) { return 12, per }
	sel := Checkpointing{Mode: CheckpointSelective}
	cfg := PlacementConfig{WideRegions: twelve}

	// Each kept product saves 1 ms (0.5%, under the 3% tolerance), kept
	// since faster at all: half the room at a time, 0 -> 4 -> 6 -> 7 ->
	// 8, then too little room for more (two regions' worth or less).
	w := &keepWorld{base: 1000, per: per, target: 1000 + 9*per + 50}
	w.stepMS = func(k int) int { return 200 - k }
	ck, log := runKeepCfg(t, sel, w, cfg, 24)
	require.Equal(t, 8, ck.KeepWide, log)
	require.Contains(t, log, "step 4: 950 B of the target is free, a region holds 100 B, 200ms a step: the last 4 of 12 selective blocks keep their MLP's wide product (was 0)")
	require.Contains(t, log, "keeping 4 blocks takes 196ms a step, 0 took 200ms: kept")
	require.Contains(t, log, "keeping 8 blocks takes 192ms a step, 7 took 193ms: kept")
	require.Equal(t, 8, strings.Count(log, "placement:"), log)

	// Slower when kept (the pool at its limit, say): back to none.
	w = &keepWorld{base: 1000, per: per, target: 1000 + 9*per + 50}
	w.stepMS = func(k int) int { return 200 + k }
	ck, log = runKeepCfg(t, sel, w, cfg, 24)
	require.Equal(t, 0, ck.KeepWide, log)
	require.Contains(t, log, "keeping 4 blocks takes 204ms a step, 0 took 200ms: the last 0 of 12 selective blocks keep their MLP's wide product (was 4)")

	// The scheduler demoting tensors is pressure: fewer at once.
	ck, log = runKeepCfg(t, Checkpointing{Mode: CheckpointSelective, KeepWide: 8}, &keepWorld{base: 1000, per: per, target: 3000, demote: 250}, cfg, 4)
	require.Equal(t, 5, ck.KeepWide, log)
	require.Contains(t, log, "step 2: the scheduler demoted 250 B to fit the budget, a region holds 100 B: the last 5 of 12 selective blocks keep their MLP's wide product (was 8)")

	// Left alone: no WideRegions; a custom policy; offloading (its own
	// keep, not asked for here); the level search still running.
	for _, c := range []struct {
		ck  Checkpointing
		cfg PlacementConfig
	}{
		{sel, PlacementConfig{}},
		{Checkpointing{Mode: CheckpointSelective, Policy: checkpoint.SaveMatMuls}, cfg},
		{Checkpointing{Mode: CheckpointSelective, Offload: true}, cfg},
		{sel, PlacementConfig{WideRegions: twelve, Auto: true}},
	} {
		ck, log = runKeepCfg(t, c.ck, &keepWorld{base: 1000, per: per, target: 1000 + 50*per}, c.cfg, 5)
		require.Equal(t, c.ck.KeepWide, ck.KeepWide, "%v", c.ck)
		require.NotContains(t, log, "wide product", "%v", c.ck)
	}
}
