package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// memoryCapture is what -memory-trace and -memory-plot do: it runs
// o.memStep training steps on random tokens (as -bench does, with the
// config's batch unless -batch says otherwise), records the
// memory history of the last one, and writes
//
//   - -memory-trace FILE.json: the step as a Chrome trace (open it in
//     ui.perfetto.dev), and FILE.snapshot.json, every segment and block at
//     the step's peak;
//   - -memory-plot FILE.png: the step's timeline of bytes by role and
//     tier, and FILE-segments.png, the segment map at the step's peak.
//
// The earlier steps fill the caches, so the recorded step shows the
// steady state; -memory-step 1 shows the first step instead. The steps
// run eagerly (-cuda-graph auto captures none here, and on is refused):
// a captured step's replay allocates nothing, so its timeline would be
// flat, the graph's blocks all held from the capture on.
func memoryCapture(o *options, cfg nn.GPTConfig, dev tensor.Device) error {
	if o.memStep < 1 {
		return fmt.Errorf("-memory-step %d: must be at least 1", o.memStep)
	}
	tr, err := newRandomRun(o, cfg, dev)
	if err != nil {
		return err
	}
	m := dev.Memory()
	label := fmt.Sprintf("step %d", o.memStep)
	var start memory.Snapshot
	for it := range o.memStep {
		if it == o.memStep-1 {
			if err := dev.Synchronize(); err != nil {
				return err
			}
			m.ResetPeaks() // the peaks below are the recorded step's
			m.RecordHistory(0)
			start = m.Snapshot() // no allocation between the two
			m.MarkHistory(label)
		}
		if _, err := tr.step(it); err != nil {
			return err
		}
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	m.MarkHistory("end")
	m.StopHistory()
	h := m.History()
	if h.Dropped > 0 {
		return fmt.Errorf("the step made more than %d allocation events: the history lost %d", memory.DefaultHistoryCapacity, h.Dropped)
	}
	// The segment map shows the peak of the tier that held the most.
	st := m.Stats()
	tier := memory.TierHost
	for t := range memory.NumTiers {
		if st.Tiers[t].Allocated.Peak > st.Tiers[tier].Allocated.Peak {
			tier = t
		}
	}
	peak, err := memviz.SnapshotAt(start, h, memviz.PeakEvent(h, tier))
	if err != nil {
		return err
	}
	title := fmt.Sprintf("train-gpt -config %s on %v, %s (batch %d x %d)", o.config, dev, label, tr.B, tr.T)
	write := func(path string, f func(io.Writer) error) error {
		if err := atomicfile.Write(context.Background(), path, f); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "train-gpt: wrote %s\n", path)
		return nil
	}
	if o.memTrace != "" {
		if err := write(o.memTrace, func(f io.Writer) error { return memviz.WriteChromeTrace(f, h, memviz.TraceOptions{}) }); err != nil {
			return err
		}
		snapPath := strings.TrimSuffix(o.memTrace, ".json") + ".snapshot.json"
		if err := write(snapPath, func(f io.Writer) error { return memviz.WriteSnapshotJSON(f, peak) }); err != nil {
			return err
		}
	}
	if o.memPlot != "" {
		if err := write(o.memPlot, func(f io.Writer) error {
			return memviz.WriteTimelinePNG(f, h, memviz.PlotOptions{Title: title + ": memory timeline"})
		}); err != nil {
			return err
		}
		mapPath := strings.TrimSuffix(o.memPlot, ".png") + "-segments.png"
		if err := write(mapPath, func(f io.Writer) error {
			return memviz.WriteSegmentMapPNG(f, peak, memviz.PlotOptions{Title: title + ": segments at the peak of " + tier.String() + " memory"})
		}); err != nil {
			return err
		}
	}
	s := st.Tiers[tier]
	fmt.Fprintf(os.Stderr, "train-gpt: %s: %d events; %s peak allocated %s, reserved %s\n", label, len(h.Events), tier,
		memory.FormatBytes(s.Allocated.Peak), memory.FormatBytes(s.Reserved.Peak))
	return nil
}
