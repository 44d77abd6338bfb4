package nn

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// wideWorld is a step under a budget at each checkpointing level: no
// checkpointing passes the budget's edge, the selective mode fits with up
// to six of its twelve blocks keeping their wide products (each kept one a
// region's bytes more), blocks checkpointed whole fit; the scheduler's
// target says there is room for more.
type wideWorld struct {
	ckpt  *Checkpointing
	steps int
}

func (w *wideWorld) Step() (memory.Plan, error) {
	const per = 100
	const edge = 1000 + 6*per + 50
	w.steps++
	var d int64
	switch {
	case w.ckpt.Mode == CheckpointNone:
		d = 5000
	case w.ckpt.wideKnob():
		d = 1000 + int64(w.ckpt.keepWide(12))*per
	default:
		d = 800
	}
	p := memory.Plan{Step: w.steps, Budget: edge, Target: 1000 + 13*per + 50, Demand: d}
	if d > edge {
		p.Excess = d - edge
	}
	return p, nil
}

// With the level searched (Auto) and the wide products too (WideRegions),
// a trial keeping more wide products than the budget holds makes the
// placement keep fewer, as the offload's keep does: the selective level,
// decided already, stays. It raised the level instead (to every second
// block checkpointed whole, the wide products' keep lost with it), and
// the search was over.
func TestPlacementWideKeepPastTheBudgetLowersTheKeep(t *testing.T) {
	var log strings.Builder
	ck := Checkpointing{Mode: CheckpointSelective}
	w := &wideWorld{ckpt: &ck}
	var clock time.Time
	p, err := NewPlacement(w, &ck, PlacementConfig{Auto: true, Log: &log, Now: func() time.Time { return clock },
		WideRegions: func() (int, int64) { return 12, 100 }})
	require.NoError(t, err)
	for range 40 {
		ms := 200
		if ck.wideKnob() {
			ms -= ck.keepWide(12) // each kept product saves a millisecond
		}
		clock = clock.Add(time.Duration(ms) * time.Millisecond)
		_, err := p.Step()
		require.NoError(t, err)
	}
	require.True(t, p.Decided(), log.String())
	require.Equal(t, CheckpointSelective, ck.Mode, log.String())
	require.Equal(t, 6, ck.KeepWide, log.String())
}

// The caller's KeepWide (train-gpt's -checkpoint auto -checkpoint-keep-wide
// 2) is not part of a level: raising the level to the selective mode kept
// it. Moving along CheckpointLevels set it to 0.
func TestPlacementKeepsTheCallersKeepWide(t *testing.T) {
	ckpt := &Checkpointing{KeepWide: 2}
	w := &fakeWorld{ckpt: ckpt, excess: map[int]int64{0: 1 << 30}, stepTime: func(lv, off int) int { return 100 + 10*lv }}
	p, log := newFakePlacement(t, w, true)
	decideWithin(t, w, p, 40, log)
	require.Equal(t, CheckpointSelective, ckpt.Mode, log.String())
	require.Equal(t, 2, ckpt.KeepWide, log.String())
}
