package nn

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/strata-ml/strata/memory"
)

// Placement steers a model's device memory under a budget between
// training steps. Two tools trade speed for memory: the placement
// scheduler (memory.Scheduler) moves long-lived tensors to the offload
// tier, where every access crosses the bus, and checkpointing recomputes
// activations in backward. Placement runs the scheduler after each step
// and moves the model's checkpointing along CheckpointLevels:
//
//   - Fit: while the scheduler reports that the step does not fit even
//     after its demotions (Plan.Excess > 0), the level is raised. Nothing
//     else keeps a step from spilling activations to the offload tier,
//     the slowest place for them. The first step after a change of level
//     does not count: it spills what the pool's segments, cut for the
//     level before, cannot hold yet (seen on the H200: 5 GiB over at a
//     level whose next step fitted).
//   - Choose (the recompute-versus-transfer cost model, by measurement):
//     once the step fits and the placement has settled (Plan.Settled),
//     the step is timed. If tensors still live off the device and are
//     touched every step (Plan.OffloadTraffic > 0), the next level is
//     tried: it frees activation memory, so the scheduler promotes
//     offloaded tensors back, and it costs recomputation. When the new
//     level has settled and been timed, it is kept if its step is faster
//     by more than Tolerance (and the next one is tried the same way),
//     else the level before it is restored and the search ends.
//   - Undo over-raising: the first steps under a budget spill and the
//     pool's fragmentation lowers the scheduler's target, so the fit
//     phase may raise past a level that fits once the placement settles.
//     When no higher level is worth trying (no offload traffic, tried
//     already, or none left), the level below is tried the same way
//     (once; if it does not fit, the Fit rule raises it back).
//   - Keep: when the checkpointing offloads (Checkpointing.Offload) and
//     PlacementConfig.OffloadRegions is set, how many of the last blocks
//     keep what they hold on the device is searched the same way: a
//     larger keep is tried while the budget has room and stays only if
//     the step is faster; pressure lowers it (placement_keep.go). In the
//     selective mode on the device, with PlacementConfig.WideRegions, how
//     many of the last blocks keep their MLP's wide product
//     (Checkpointing.KeepWide) is searched so once the level is decided;
//     a step that a kept wide product makes pass the budget lowers that
//     keep, not the level.
//
// Both costs are measured rather than modelled: the bus's speed and the
// share of a step that recomputation adds depend on the model, the
// precision, the attention kernels and the machine, and a few settled
// steps at each level say which is cheaper. Checkpointing changes no result
// (the levels are bit for bit the same), and neither does placement, so
// the search changes only speed and memory.
//
// A step is timed from the end of one Step call to the start of the next:
// call Step once after every training step, with nothing else between
// (an evaluation between two calls makes that step look slower; the
// median of TimedSteps steps absorbs one such step).
type Placement struct {
	sched Planner
	ckpt  *Checkpointing
	cfg   PlacementConfig

	last      time.Time  // the end of the last Step
	quiet     bool       // the last Step moved nothing and kept the level
	fresh     bool       // the last Step changed the level: the next step is its first
	keep      keepSearch // the choice of OffloadKeep (placement_keep.go)
	times     map[int][]time.Duration
	probe     int           // the level a trial started from; -1 when none runs
	probeFrom time.Duration // its step time
	seen      map[int]bool  // levels timed or tried
	done      bool
}

// Planner is what a Placement steers with: *memory.Scheduler, whose Step
// observes the step that just ended, moves tensors between tiers and
// returns its plan.
type Planner interface {
	Step() (memory.Plan, error)
}

// PlacementConfig tunes a Placement. Zero fields take the defaults.
type PlacementConfig struct {
	// Auto lets the Placement change the checkpointing level; without it
	// only the scheduler runs.
	Auto bool
	// TimedSteps is how many settled steps are timed at a level before it
	// is compared (default 3; their median counts, so one step slowed by
	// something else, an evaluation say, does not decide).
	TimedSteps int
	// Tolerance is by how much a higher level must be faster to be kept
	// (default 0.03: 3%).
	Tolerance float64
	// Log receives a line for every change of level and every comparison
	// (nil: none).
	Log io.Writer
	// Now is the clock (nil: time.Now), for tests.
	Now func() time.Time
	// OffloadRegions, when set, lets the Placement choose the
	// checkpointing's OffloadKeep while it offloads (tuneKeep): it reports
	// the regions of the last forward pass and the most bytes one held
	// (GPT.OffloadRegions).
	OffloadRegions func() (n int, largest int64)
	// WideRegions, when set, lets the Placement choose KeepWide in the
	// selective mode on the device once the level is decided (tuneKeep):
	// it reports the checkpointed blocks of the last forward pass and the
	// bytes one wide product takes (GPT.WideRegions).
	WideRegions func() (n int, per int64)
}

// NewPlacement returns a Placement over sched (a *memory.Scheduler) that
// changes *ckpt (a model's Checkpointing field) when cfg.Auto is set.
func NewPlacement(sched Planner, ckpt *Checkpointing, cfg PlacementConfig) (*Placement, error) {
	switch {
	case sched == nil || ckpt == nil:
		return nil, fmt.Errorf("nn: NewPlacement: a scheduler and a checkpointing setting are required")
	case cfg.TimedSteps < 0 || !(cfg.Tolerance >= 0 && cfg.Tolerance < 1): // NaN too
		return nil, fmt.Errorf("nn: NewPlacement: timed steps %d must be >= 0 and tolerance %g in [0, 1)", cfg.TimedSteps, cfg.Tolerance)
	}
	if cfg.TimedSteps == 0 {
		cfg.TimedSteps = 3
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = 0.03
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Placement{sched: sched, ckpt: ckpt, cfg: cfg, times: map[int][]time.Duration{}, probe: -1, seen: map[int]bool{}}
	p.done = !cfg.Auto || p.level() < 0
	p.keep = keepSearch{knob: p.knob(), fresh: true, times: map[int][]time.Duration{}, probe: -1}
	p.keep.lastKeep = p.keepValue()
	return p, nil
}

// level is the index of *p.ckpt in CheckpointLevels, -1 for a setting
// outside them (a custom policy or stride: left alone).
func (p *Placement) level() int {
	return slices.IndexFunc(CheckpointLevels, func(l Checkpointing) bool {
		return l.sameLevel(*p.ckpt) && p.ckpt.Policy == nil
	})
}

// Decided reports whether the search for a level is over: the level stays
// unless a later step stops fitting. Without Auto it is always true.
func (p *Placement) Decided() bool { return p.done }

// StepTime is the median of the timed settled steps at the current level
// (0 before any).
func (p *Placement) StepTime() time.Duration { return median(p.times[p.level()]) }

// Step runs the scheduler on the step that just ended, then raises,
// tries or restores the checkpointing level as described on Placement.
func (p *Placement) Step() (memory.Plan, error) {
	now := p.cfg.Now()
	lv := p.level()
	if p.quiet && !p.last.IsZero() {
		if lv >= 0 {
			p.times[lv] = append(p.times[lv], now.Sub(p.last))
		}
		p.timeKeep(now.Sub(p.last))
	}
	plan, err := p.sched.Step()
	if err != nil {
		return plan, err
	}
	p.quiet = plan.Settled()
	if !p.quiet {
		delete(p.times, lv) // the placement changed: its steps are timed again
	}
	if p.cfg.Auto && lv >= 0 {
		p.decide(plan, lv)
	}
	p.tuneKeep(plan)
	p.keep.lastKeep = p.keepValue()
	p.last = p.cfg.Now()
	return plan, nil
}

// decide applies the rules to the plan of a step run at level lv.
func (p *Placement) decide(plan memory.Plan, lv int) {
	first := p.fresh
	p.fresh = false
	if plan.Excess > 0 && p.knob() == knobWide && p.keepValue() > 0 {
		// The wide products kept pass the budget: tuneKeep keeps fewer,
		// and the level, decided, stays (raising it lost the keep and
		// ended the search at a level that recomputes more).
		return
	}
	if plan.Excess > 0 && first && lv+1 < len(CheckpointLevels) {
		// The first step at a new level spills what the pool's segments,
		// cut for the level before, cannot hold yet; the second says
		// whether the level fits.
		p.log("step %d: the first step at checkpointing %v passes the budget by %s: judged by the next", plan.Step, CheckpointLevels[lv], memory.FormatBytes(plan.Excess))
		return
	}
	if plan.Excess > 0 {
		if lv+1 < len(CheckpointLevels) {
			p.probe = -1 // a level that does not fit is no candidate
			p.set(lv+1, fmt.Sprintf("step %d: the device demand passes the budget by %s after the scheduler's demotions: checkpointing raised to %v",
				plan.Step, memory.FormatBytes(plan.Excess), CheckpointLevels[lv+1]))
		} else if !p.done {
			p.done = true
			p.log("step %d: the device demand passes the scheduler's target by %s at the highest checkpointing level: steps may spill to the offload tier", plan.Step, memory.FormatBytes(plan.Excess))
		}
		return
	}
	if p.done || !p.quiet || len(p.times[lv]) < p.cfg.TimedSteps {
		return
	}
	t := median(p.times[lv])
	p.seen[lv] = true
	if p.probe >= 0 {
		from, tf := p.probe, p.probeFrom
		p.probe = -1
		if float64(t) > float64(tf)*(1-p.cfg.Tolerance) {
			p.done = true
			p.set(from, fmt.Sprintf("step %d: checkpointing %v takes %v a step, %v took %v: back to %v",
				plan.Step, CheckpointLevels[lv], round(t), CheckpointLevels[from], round(tf), CheckpointLevels[from]))
			return
		}
		p.log("step %d: checkpointing %v takes %v a step, %v took %v: kept", plan.Step, CheckpointLevels[lv], round(t), CheckpointLevels[from], round(tf))
	}
	traffic := plan.OffloadTraffic()
	switch {
	case traffic > 0 && lv+1 < len(CheckpointLevels) && !p.seen[lv+1]:
		p.try(lv, lv+1, t, fmt.Sprintf("step %d: %s a step cross the bus to tensors in the offload tier, in %v a step: trying checkpointing %v, which frees device memory for them at the cost of recomputation",
			plan.Step, memory.FormatBytes(traffic), round(t), CheckpointLevels[lv+1]))
	case lv > 0 && !p.seen[lv-1]:
		// The level was raised past lv-1 in an unsettled step (the first
		// steps spill and the pool's fragmentation lowers the target):
		// lv-1 recomputes less, and may fit now.
		p.try(lv, lv-1, t, fmt.Sprintf("step %d: %v a step at checkpointing %v with %s a step over the bus: trying %v, which recomputes less, in case it fits",
			plan.Step, round(t), CheckpointLevels[lv], memory.FormatBytes(traffic), CheckpointLevels[lv-1]))
	default:
		p.done = true
	}
}

// try starts a trial of level to from level from, whose step took t.
func (p *Placement) try(from, to int, t time.Duration, why string) {
	p.probe, p.probeFrom = from, t
	p.seen[to] = true // tried once, whatever it gives
	p.set(to, why)
}

// set moves the model to level i and says why. KeepWide is no part of a
// level: the caller's (or the keep search's) stays.
func (p *Placement) set(i int, why string) {
	kw := p.ckpt.KeepWide
	*p.ckpt = CheckpointLevels[i]
	p.ckpt.KeepWide = kw
	p.quiet, p.fresh = false, true
	delete(p.times, i)
	p.log("%s", why)
}

func (p *Placement) log(format string, a ...any) {
	if p.cfg.Log != nil {
		fmt.Fprintf(p.cfg.Log, "placement: "+format+"\n", a...)
	}
}

func median(ts []time.Duration) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[(len(s)-1)/2] // the lower of the middle two
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
