package nn

import (
	"fmt"
	"time"

	"github.com/strata-ml/strata/memory"
)

// keepSearch is the state of Placement's choice of a keep: OffloadKeep
// while the checkpointing offloads, KeepWide in the selective mode on the
// device (a change of knob starts the search afresh).
type keepSearch struct {
	knob     keepKnob
	fresh    bool // the last Step changed the keep (or none ran yet): the next step is not judged
	times    map[int][]time.Duration
	probe    int // the keep a trial started from; -1 when none runs
	from     time.Duration
	cap      int // with capped, the most regions that may be kept
	capped   bool
	done     bool
	lastKeep int // the keep the last step ran at
}

// tuneKeep chooses the model's OffloadKeep (how many of the last
// checkpointed regions keep what they hold on the device) from a step's
// plan and measured step times, when the checkpointing offloads and
// PlacementConfig.OffloadRegions is set. What a region holds costs its
// bytes of device memory if kept, and its bytes each way over the bus if
// moved. Whether moving less is faster is measured, not modelled: on the
// H200 (session 17) keeping 3 to 6 of gpt2's 12 blocks under half the
// device's peak ran no faster than 2, and 8 or 9 slower (the AdamW state
// they pushed to host memory), so a larger keep must earn its place:
//
//   - under pressure (the step passed the budget, Plan.Excess, or the
//     scheduler had to demote tensors to fit it, Plan.Demoted): keep
//     fewer, by the regions the pressure covers, down to none; no larger
//     keep is tried again;
//   - with room left under the target of more than two regions and the
//     scheduler settled: once TimedSteps settled steps are timed at the
//     current keep, a larger one (by half the room in regions, at least
//     one) is tried; once its steps are timed it stays if faster by more
//     than Tolerance, and the search goes on from it, else the keep
//     before it comes back and the search ends.
//
// The first step is not judged, nor the step after a change (the pool's
// segments are cut for the step before). Results are the same at every
// keep, bit for bit.
//
// KeepWide is searched the same way (a kept wide product costs its bytes
// of device memory and saves its recomputation), once the search for a
// level is over, so that the two never judge the same steps, except that
// a trial stays if its step is faster at all: each kept product only
// removes work, too little to pass the tolerance a few at a time (gpt2 in
// float32: 0.78 ms of a 169 ms step each). Half the room at a time, not
// all of it: on the H200 (session 18, call 2) keeping 6 or 8 at once cut
// the classic pool's segments so that it refused requests below the
// budget and AdamW state left the device, where 3 and 5 ran faster.
func (p *Placement) tuneKeep(plan memory.Plan) {
	ks := &p.keep
	if kn := p.knob(); kn != ks.knob {
		*ks = keepSearch{knob: kn, fresh: true, times: map[int][]time.Duration{}, probe: -1, lastKeep: p.keepValue()}
	}
	if ks.knob == knobNone {
		return
	}
	if ks.fresh {
		ks.fresh = false
		return
	}
	n, per := p.knobRegions()
	if n == 0 || per <= 0 {
		return
	}
	k := p.keepValue()
	if pressure := plan.Excess + plan.Demoted; pressure > 0 {
		if k == 0 {
			return
		}
		next := max(0, k-int((pressure+per-1)/per))
		ks.cap, ks.capped, ks.probe = next, true, -1
		why := fmt.Sprintf("the step passed the budget by %s", memory.FormatBytes(plan.Excess))
		if plan.Excess == 0 {
			why = fmt.Sprintf("the scheduler demoted %s to fit the budget", memory.FormatBytes(plan.Demoted))
		}
		p.setKeep(next, n, k, fmt.Sprintf("step %d: %s, a region holds %s", plan.Step, why, memory.FormatBytes(per)))
		return
	}
	if ks.done || !p.quiet || len(ks.times[k]) < p.cfg.TimedSteps {
		return
	}
	t := median(ks.times[k])
	if ks.probe >= 0 {
		from, tf := ks.probe, ks.from
		ks.probe = -1
		// A kept wide product only removes work (its recomputation,
		// about half a percent of gpt2's step each): any gain counts.
		tol := p.cfg.Tolerance
		if ks.knob == knobWide {
			tol = 0
		}
		if float64(t) >= float64(tf)*(1-tol) {
			ks.done = true
			p.setKeep(from, n, k, fmt.Sprintf("step %d: keeping %d blocks takes %v a step, %d took %v", plan.Step, k, round(t), from, round(tf)))
			return
		}
		p.log("step %d: keeping %d blocks takes %v a step, %d took %v: kept", plan.Step, k, round(t), from, round(tf))
	}
	limit := n
	if ks.capped {
		limit = min(n, ks.cap)
	}
	room := plan.Target - plan.Demand
	if plan.Pending > 0 || k >= limit || room <= 2*per {
		ks.done = true
		return
	}
	ks.probe, ks.from = k, t
	p.setKeep(min(limit, k+max(1, int(room/per)/2)), n, k,
		fmt.Sprintf("step %d: %s of the target is free, a region holds %s, %v a step", plan.Step, memory.FormatBytes(room), memory.FormatBytes(per), round(t)))
}

// setKeep makes the model keep next of n regions (k before) and says why.
func (p *Placement) setKeep(next, n, k int, why string) {
	if p.keep.knob == knobWide {
		p.ckpt.KeepWide = next
	} else {
		p.ckpt.OffloadKeep = next
		if next == 0 {
			p.ckpt.OffloadKeep = -1 // none
		}
	}
	p.keep.fresh, p.quiet = true, false
	delete(p.keep.times, next)
	if p.keep.knob == knobWide {
		p.log("%s: the last %d of %d selective blocks keep their MLP's wide product (was %d)", why, next, n, k)
		return
	}
	p.log("%s: offloading keeps the last %d of %d checkpointed blocks on the device (was %d)", why, next, n, k)
}

// timeKeep records the step that just ended at the keep it ran with, when
// it was settled (Placement.quiet).
func (p *Placement) timeKeep(dt time.Duration) {
	if p.keep.knob != knobNone && p.knob() == p.keep.knob && p.keepValue() == p.keep.lastKeep {
		p.keep.times[p.keep.lastKeep] = append(p.keep.times[p.keep.lastKeep], dt)
	}
}

// keepKnob is what the keep search turns.
type keepKnob int

const (
	knobNone keepKnob = iota
	knobOffload
	knobWide
)

// knob is the keep the model's checkpointing has to search now: the
// offload's keep while it offloads (with OffloadRegions), KeepWide in the
// selective mode on the device once the level is decided (with
// WideRegions), else none.
func (p *Placement) knob() keepKnob {
	switch {
	case p.ckpt.Offload && p.cfg.OffloadRegions != nil:
		return knobOffload
	case p.ckpt.wideKnob() && p.cfg.WideRegions != nil && p.done:
		return knobWide
	}
	return knobNone
}

// knobRegions is the knob's regions and the bytes one costs if kept.
func (p *Placement) knobRegions() (int, int64) {
	if p.keep.knob == knobWide {
		return p.cfg.WideRegions()
	}
	return p.cfg.OffloadRegions()
}

// keepValue is the knob's value now (0 without a knob).
func (p *Placement) keepValue() int {
	switch p.knob() {
	case knobOffload:
		return p.ckpt.offloadKeep()
	case knobWide:
		n, _ := p.cfg.WideRegions()
		return p.ckpt.keepWide(n)
	}
	return 0
}
