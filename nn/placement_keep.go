package nn

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
)

// tuneKeep chooses the model's OffloadKeep (how many of the last
// checkpointed regions keep what they hold on the device) from a step's
// plan, when the checkpointing offloads and PlacementConfig.OffloadRegions
// is set. What a region holds costs its bytes of device memory if kept,
// and its bytes each way over the bus if moved: under a budget with room
// left, moving it only adds traffic, and the copies of a forward pass
// that moves much (about 2.6 GB for float32 gpt2 at B8 T1024) run longer
// than the pass itself at the bus's device-to-host speed, so that a pool
// at its budget waits for them. So:
//
//   - under pressure (the step passed the budget, Plan.Excess, or the
//     scheduler had to demote tensors to fit it, Plan.Demoted): keep
//     fewer, by the regions the pressure covers, down to none, and never
//     again more than that;
//   - room left under the target of more than two regions, with the
//     scheduler settled (nothing pending promotion): keep more, by half
//     that room in regions (at least one), up to every region.
//
// The first step is not judged, nor the step after a change (the pool's
// segments are cut for the step before). Results are the same at every
// keep, bit for bit.
func (p *Placement) tuneKeep(plan memory.Plan) {
	if !p.ckpt.Offload || p.cfg.OffloadRegions == nil {
		return
	}
	if p.keepFresh {
		p.keepFresh = false
		return
	}
	n, per := p.cfg.OffloadRegions()
	if n == 0 || per <= 0 {
		return
	}
	k := p.ckpt.offloadKeep()
	var next int
	var why string
	pressure := plan.Excess + plan.Demoted
	switch room := plan.Target - plan.Demand; {
	case pressure > 0 && k > 0:
		next = max(0, k-int((pressure+per-1)/per))
		p.keepCap, p.keepCapped = next, true // the pressure says what fits: no more is tried again
		why = fmt.Sprintf("the step passed the budget by %s", memory.FormatBytes(plan.Excess))
		if plan.Excess == 0 {
			why = fmt.Sprintf("the scheduler demoted %s to fit the budget", memory.FormatBytes(plan.Demoted))
		}
	case pressure == 0 && plan.Pending == 0 && k < p.keepLimit(n) && room > 2*per:
		next = min(p.keepLimit(n), k+max(1, int(room/per)/2))
		why = fmt.Sprintf("%s of the target is free", memory.FormatBytes(room))
	default:
		return
	}
	p.ckpt.OffloadKeep = next
	if next == 0 {
		p.ckpt.OffloadKeep = -1 // none
	}
	p.keepFresh = true
	p.quiet = false
	p.log("step %d: %s, a region holds %s: offloading keeps the last %d of %d checkpointed blocks on the device (was %d)",
		plan.Step, why, memory.FormatBytes(per), next, n, k)
}

// keepLimit is the most regions tuneKeep keeps of n: no more than a keep
// lowered for passing the budget.
func (p *Placement) keepLimit(n int) int {
	if p.keepCapped {
		return min(n, p.keepCap)
	}
	return n
}
