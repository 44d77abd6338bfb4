package main

import (
	"fmt"
	"io"
	"time"

	"github.com/strata-ml/strata/tensor"
)

// The phases of a training step that -bench times (trainer.mark): each
// is the time from the mark before it. "start" is the time between steps
// (the placement's work, the loop, drawing the next batch); the host's
// "gradient norm" includes its wait for the backward pass.
const (
	phaseStart     = "start"
	phaseForward   = "forward"
	phaseBackward  = "backward"
	phaseClip      = "gradient norm"
	phaseLossRead  = "loss read"
	phaseOptimizer = "optimizer"
	phaseGraph     = "graph" // -cuda-graph: the replayed step (forward to optimizer)
)

var phaseOrder = []string{phaseStart, phaseForward, phaseBackward, phaseClip, phaseGraph, phaseLossRead, phaseOptimizer}

// mark records phase on the trainer's timer, if it has one. A failed
// mark (a device error) drops the timer: the step's own ops report it.
func (t *trainer) mark(phase string) {
	if t.timer != nil && t.timer.Mark(phase) != nil {
		t.timer = nil
	}
}

// phaseTime is a phase's time a step, on the device and on the host.
type phaseTime struct {
	Name     string  `json:"name"`
	DeviceMS float64 `json:"device_ms"`
	HostMS   float64 `json:"host_ms"`
}

// phaseTimes averages the timer's spans of steps steps by phase, in step
// order (the first span, from the first step's start to its forward mark,
// and every later one are whole steps' phases; the time before the first
// start mark is not counted). Each phase is averaged over the steps that
// ran it: a step the fp16 gradient scaler skips has no gradient norm,
// loss read or optimizer phase, and dividing their time by every step
// made the update look faster the more steps were skipped.
func phaseTimes(tm *tensor.Timer, steps int) ([]phaseTime, error) {
	spans, err := tm.Spans()
	if err != nil || len(spans) == 0 || steps == 0 {
		return nil, err
	}
	dev, host := map[string]time.Duration{}, map[string]time.Duration{}
	count := map[string]int{}
	for _, s := range spans {
		dev[s.Name] += s.Device
		host[s.Name] += s.Host
		count[s.Name]++ // "start": between steps, one fewer than the steps
	}
	var out []phaseTime
	for _, name := range phaseOrder {
		n := float64(count[name])
		if n <= 0 {
			continue
		}
		out = append(out, phaseTime{Name: name, DeviceMS: dev[name].Seconds() * 1000 / n, HostMS: host[name].Seconds() * 1000 / n})
	}
	return out, nil
}

// printPhases writes the phases as a table.
func printPhases(w io.Writer, ps []phaseTime) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "| phase of a step | device ms | host ms |\n|---|---|---|\n")
	var d, h float64
	for _, p := range ps {
		fmt.Fprintf(w, "| %s | %.2f | %.2f |\n", p.Name, p.DeviceMS, p.HostMS)
		d += p.DeviceMS
		h += p.HostMS
	}
	fmt.Fprintf(w, "| all | %.2f | %.2f |\n\n", d, h)
}
