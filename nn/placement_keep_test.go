package nn

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// keepWorld is a step under a budget whose device demand grows by a
// region's bytes for each region kept: the plan Placement's tuneKeep reads.
type keepWorld struct {
	ckpt                   *Checkpointing
	base, per, target, cap int64 // demand with none kept, a region's bytes, the target; cap: the budget's real edge (0: target)
	demote                 int64 // bytes the scheduler demotes in the second step
	steps                  int
}

func (w *keepWorld) Step() (memory.Plan, error) {
	w.steps++
	d := w.base + int64(w.ckpt.offloadKeep())*w.per
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

// Under a budget with room for more regions than the default two, the
// placement keeps more, half the room at a time; over the budget, or
// when the scheduler demotes tensors, it keeps fewer and never goes back
// above; without OffloadRegions, or without offloading, it leaves the keep
// alone.
func TestPlacementTunesOffloadKeep(t *testing.T) {
	const per = 100
	run := func(ck Checkpointing, w *keepWorld, regions func() (int, int64), steps int) (Checkpointing, string) {
		var log strings.Builder
		w.ckpt = &ck
		p, err := NewPlacement(w, &ck, PlacementConfig{Log: &log, OffloadRegions: regions})
		require.NoError(t, err)
		for range steps {
			_, err := p.Step()
			require.NoError(t, err)
		}
		return ck, log.String()
	}
	twelve := func() (int, int64) { return 12, per }
	off := Checkpointing{Mode: CheckpointSelective, Offload: true}

	// Room for 4.5 regions more than the default two: half of it at a
	// time (2, then 1), each after a step at the new keep, then no more.
	ck, log := run(off, &keepWorld{base: 1000, per: per, target: 1000 + 6*per + 50}, twelve, 9)
	require.Equal(t, 5, ck.offloadKeep(), log)
	require.Contains(t, log, "step 2: 450 B of the target is free, a region holds 100 B: offloading keeps the last 4 of 12 checkpointed blocks on the device (was 2)")
	require.Contains(t, log, "step 4: 250 B of the target is free")
	require.Equal(t, 2, strings.Count(log, "placement:"), "settles: %s", log)

	// The target says 6 more fit, but the budget's edge passes at 7 kept:
	// down by the excess, and capped there for good.
	ck, log = run(off, &keepWorld{base: 1000, per: per, target: 1000 + 13*per + 50, cap: 1000 + 6*per + 50}, twelve, 14)
	require.Equal(t, 6, ck.offloadKeep(), log)
	require.Contains(t, log, "step 4: the step passed the budget by 50 B, a region holds 100 B: offloading keeps the last 6 of 12 checkpointed blocks on the device (was 7)")
	require.Equal(t, 2, strings.Count(log, "placement:"), "2 -> 7 -> 6, no more: %s", log)

	// The scheduler demoting tensors to make room is pressure too.
	ck, log = run(Checkpointing{Mode: CheckpointSelective, Offload: true, OffloadKeep: 8}, &keepWorld{base: 1000, per: per, target: 2000, demote: 250}, twelve, 4)
	require.Equal(t, 5, ck.offloadKeep(), log)
	require.Contains(t, log, "step 2: the scheduler demoted 250 B to fit the budget, a region holds 100 B")

	// Far over the budget: none kept.
	ck, log = run(off, &keepWorld{base: 1000, per: per, target: 1000 - 10*per}, twelve, 3)
	require.Equal(t, 0, ck.offloadKeep(), log)
	require.Equal(t, -1, ck.OffloadKeep, "none is negative")

	// Never more than the regions there are.
	ck, _ = run(off, &keepWorld{base: 1000, per: per, target: 1000 + 100*per}, twelve, 4)
	require.Equal(t, 12, ck.offloadKeep())

	// Left alone: no OffloadRegions, no offloading, no pass seen yet.
	for _, c := range []struct {
		ck      Checkpointing
		regions func() (int, int64)
	}{{off, nil}, {Checkpointing{Mode: CheckpointSelective}, twelve}, {off, func() (int, int64) { return 0, 0 }}} {
		ck, log = run(c.ck, &keepWorld{base: 1000, per: per, target: 1000 + 50*per}, c.regions, 4)
		require.Equal(t, c.ck, ck)
		require.Empty(t, log)
	}
}
