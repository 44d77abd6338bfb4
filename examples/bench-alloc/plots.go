package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// writePlot writes one picture (atomicfile.Write; tests: a write during
// which a signal arrives).
var writePlot = atomicfile.Write

// plotReplay replays a trace once more with the history recorded (not
// timed) and writes into dir, named after the trace and the mode: the
// Chrome trace (.trace.json), the timeline (-timeline.png) and the
// segment map at the peak of allocated bytes (-segments.png). An
// expandable replay plans the steps when plan is set, as the timed
// replays do: the pictures are of the replay the table reports.
func plotReplay(path string, ops []poolOp, slots int, backend memory.Backend, expandable, plan bool, dir string) (err error) {
	mode := "classic"
	if expandable {
		mode = "expandable"
	}
	p := memory.NewPool(backend, memory.PoolConfig{Expandable: expandable, PlanSteps: expandable && plan})
	defer func() { err = errors.Join(err, p.Close()) }()
	// An allocation and a free per op, and the segments' and pages'
	// reserve and release events beside them (an expandable pool maps and
	// unmaps pages as it goes): a lost event would make the segment map
	// wrong, so a history that lost any is an error.
	capacity := min(4*len(ops)+4096, memory.MaxHistoryCapacity)
	p.RecordHistory(capacity)
	start := memory.Snapshot{HistoryTime: -1, Tiers: []memory.TierSnapshot{{Tier: backend.Tier(), Backend: backend.Name()}}}
	blocks, op, err := runOps(p, ops, slots)
	if err != nil {
		return errors.Join(fmt.Errorf("%s (%s, recorded): %w", where(path, op.event, op.line), mode, err), freeAll(p, blocks))
	}
	h := p.History()
	// The pictures need only the history: the blocks still live go back
	// now, so that an error below (a file that cannot be written) is not
	// followed by Close's report of them as leaked.
	if err := freeAll(p, blocks); err != nil {
		return err
	}
	if h.Dropped > 0 {
		return fmt.Errorf("%s (%s, recorded): the replay made more than %d history events, %d lost: too many for its plots", path, mode, capacity, h.Dropped)
	}
	peak, err := memviz.SnapshotAt(start, h, memviz.PeakEvent(h, backend.Tier()))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(path), ".csv")
	title := fmt.Sprintf("%s replayed on %s, %s segments", filepath.Base(path), backend.Name(), mode)
	stem := filepath.Join(dir, name+"-"+mode)
	for _, f := range []struct {
		suffix string
		write  func(io.Writer) error
	}{
		{".trace.json", func(f io.Writer) error { return memviz.WriteChromeTrace(f, h, memviz.TraceOptions{}) }},
		{"-timeline.png", func(f io.Writer) error {
			return memviz.WriteTimelinePNG(f, h, memviz.PlotOptions{Title: title + ": timeline", ByEvent: true})
		}},
		{"-segments.png", func(f io.Writer) error {
			return memviz.WriteSegmentMapPNG(f, peak, memviz.PlotOptions{Title: title + ": at the peak"})
		}},
	} {
		// Atomically, SIGINT and SIGTERM abandoning the write: an
		// interrupted run leaves the previous file and no temporary one
		// (the signal used to end the process in the middle of drawing a
		// picture, its temporary file left behind), and exits with 128 +
		// the signal.
		path := stem + f.suffix
		if err := cli.Interruptible("writing "+path, func(ctx context.Context) error {
			return writePlot(ctx, path, f.write)
		}); err != nil {
			var ex *cli.ExitError
			if errors.As(err, &ex) {
				return err
			}
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
