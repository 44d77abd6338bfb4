package main

import (
	"fmt"
	"os"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// The device budget and the placement scheduler (-device-budget,
// -placement-plan): the device tier's pool may reserve at most the budget;
// under the hybrid policy what does not fit spills to the offload tier
// (reported once) and the placement scheduler moves the tensors touched
// least per step there between steps, so that the step fits again.

// checkBudget reads -device-budget's form before any work (a share is
// resolved against the device's memory in setBudget).
func (o *options) checkBudget() error {
	n := int64(0)
	if o.budget != "" {
		var err error
		if n, err = memory.ParseBudget(o.budget, 1<<40); err != nil {
			return fmt.Errorf("-device-budget: %w", err)
		}
	}
	if o.budgetMargin != 0 && (n == 0 || o.policy != "hybrid") {
		return fmt.Errorf("-budget-margin %g: the placement scheduler's margin needs -device-budget under -policy hybrid", o.budgetMargin)
	}
	if !(o.budgetMargin >= 0 && o.budgetMargin < 0.5) { // NaN too
		return fmt.Errorf("-budget-margin %g: want a share of the budget in [0, 0.5), 0 for the scheduler's default (%g)", o.budgetMargin, memory.DefaultSchedulerMargin)
	}
	if o.budget == "" {
		return nil
	}
	if o.placementPlan && o.policy != "hybrid" {
		return fmt.Errorf("-placement-plan: the placement scheduler runs under -policy hybrid, not %s", o.policy)
	}
	return nil
}

// setBudget applies -device-budget to dev's memory manager and, under the
// hybrid policy, attaches the placement scheduler (before the model is
// made, so that it tracks the parameters and the optimizer state). The
// returned function detaches the scheduler and restores the device's
// previous limit (the device, and its manager, outlive the run).
func setBudget(o *options, dev tensor.Device) (undo func(), err error) {
	undo = func() {}
	if o.budget == "" {
		return undo, nil
	}
	m := dev.Memory()
	pool := m.Pool(memory.TierDevice)
	if pool == nil {
		return undo, fmt.Errorf("-device-budget: %v has no device tier", dev)
	}
	_, total, _ := pool.Backend().Info()
	n, err := memory.ParseBudget(o.budget, total)
	if err != nil {
		return undo, fmt.Errorf("-device-budget: %w", err)
	}
	old := m.Limit(memory.TierDevice)
	if err := m.SetLimit(memory.TierDevice, n); err != nil {
		return undo, fmt.Errorf("-device-budget: %w", err)
	}
	undo = func() { _ = m.SetLimit(memory.TierDevice, old) }
	if n == 0 {
		return undo, nil
	}
	fmt.Fprintf(os.Stderr, "device budget: %s", memory.FormatBytes(n))
	if !m.Policy().Spill {
		fmt.Fprintln(os.Stderr, " (-policy "+o.policy+" does not spill: a step that needs more fails)")
		return undo, nil
	}
	fmt.Fprintln(os.Stderr, "; what does not fit spills to the offload tier, and the placement scheduler moves the least used tensors there between steps")
	if o.sched, err = m.NewScheduler(memory.SchedulerConfig{Budget: n, Margin: o.budgetMargin}); err != nil {
		undo()
		return func() {}, err
	}
	s := o.sched
	return func() { s.Close(); _ = m.SetLimit(memory.TierDevice, old) }, nil
}

// place runs the placement after a step (it is nil without a budget)
// and prints its plan after the second step, and after any step that
// moved tensors, when asked.
func (t *trainer) place(step int) error {
	if t.placer == nil {
		return nil
	}
	p, err := t.placer.Step()
	if err != nil {
		return fmt.Errorf("placement after step %d: %w", step, err)
	}
	if t.showPlan && (p.Step == 2 || p.Demoted+p.Promoted > 0 && p.Step > 2) {
		fmt.Fprint(os.Stderr, "\n"+p.String())
	}
	return nil
}

// placementLog prints the placement's decisions (raised, tried, kept or
// restored checkpointing levels) on their own lines, clear of the
// progress bar.
type placementLog struct{}

func (placementLog) Write(b []byte) (int, error) {
	_, err := fmt.Fprintf(os.Stderr, "\n%s", b)
	return len(b), err
}
