package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestPhaseTimes: the spans of three steps' marks average by phase, in
// step order, the time between steps over the two gaps there are; the
// table sums them.
func TestPhaseTimes(t *testing.T) {
	tm := tensor.NewTimer(tensor.CPU())
	defer tm.Close()
	tr := &trainer{timer: tm}
	for range 3 {
		for _, p := range phaseOrder {
			tr.mark(p)
			if p == phaseBackward {
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
	ps, err := phaseTimes(tm, 3)
	require.NoError(t, err)
	require.Len(t, ps, len(phaseOrder))
	for i, p := range ps {
		assert.Equal(t, phaseOrder[i], p.Name)
		assert.Equal(t, p.HostMS, p.DeviceMS, "the CPU's spans are the host's")
	}
	assert.GreaterOrEqual(t, ps[3].HostMS, 2.0, "the gradient norm follows the 2 ms sleep")
	var b bytes.Buffer
	printPhases(&b, ps)
	assert.Contains(t, b.String(), "| gradient norm | ")
	assert.Contains(t, b.String(), "| all | ")

	none, err := phaseTimes(tensor.NewTimer(tensor.CPU()), 3)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestPhaseTimesSkippedStep: a step the fp16 gradient scaler skips marks
// no gradient norm, loss read or optimizer; those phases are averaged
// over the steps that ran them, not over every step (which halved the
// optimizer's time here).
func TestPhaseTimesSkippedStep(t *testing.T) {
	tm := tensor.NewTimer(tensor.CPU())
	defer tm.Close()
	tr := &trainer{timer: tm}
	for _, p := range phaseOrder { // a step with its update
		tr.mark(p)
	}
	for _, p := range []string{phaseStart, phaseForward, phaseBackward} { // a skipped one
		tr.mark(p)
	}
	spans, err := tm.Spans()
	require.NoError(t, err)
	var opt, start time.Duration
	for _, s := range spans {
		switch s.Name {
		case phaseOptimizer:
			opt += s.Host
		case phaseStart:
			start += s.Host
		}
	}
	ps, err := phaseTimes(tm, 2)
	require.NoError(t, err)
	got := map[string]float64{}
	for _, p := range ps {
		got[p.Name] = p.HostMS
	}
	assert.Equal(t, opt.Seconds()*1000, got[phaseOptimizer], "the one update's time")
	assert.Equal(t, start.Seconds()*1000, got[phaseStart], "the one gap between the steps")
}
