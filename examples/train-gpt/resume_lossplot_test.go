package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// plotted runs o and returns the history and title its -loss-plot drew,
// and its stderr.
func plotted(t *testing.T, o *options) (lossHistory, string, string) {
	t.Helper()
	var h lossHistory
	var title string
	writeLossPlotFn = func(ctx context.Context, path, ti string, hist *lossHistory) error {
		h, title = *hist, ti
		return writeLossPlot(ctx, path, ti, hist)
	}
	t.Cleanup(func() { writeLossPlotFn = writeLossPlot })
	var err error
	out := captureStderr(t, func() { err = run(o) })
	require.NoError(t, err, out)
	return h, title, out
}

// plotRunArgs are the flags of a 10-step CPU run into dir that the
// loss-plot resume tests interrupt and resume, with extra after them.
func plotRunArgs(dir string, extra ...string) []string {
	return append([]string{"-device", "cpu", "-quiet", "-steps", "10", "-batch", "4", "-eval-every", "4", "-sample", "0",
		"-out", filepath.Join(dir, "w.safetensors"), "-state", filepath.Join(dir, "s.safetensors")}, extra...)
}

// parsePlotRun parses args, failing the test on an error.
func parsePlotRun(t *testing.T, args []string) *options {
	t.Helper()
	o, err := parseFlags(args)
	require.NoError(t, err)
	return o
}

// fourStepHistory is the loss history of steps 1 to 4, training loss
// 10 - step, held-out loss (the step) at the even steps.
func fourStepHistory() lossHistory {
	var h lossHistory
	for s := 1; s <= 4; s++ {
		held := math.NaN()
		if s%2 == 0 {
			held = float64(s)
		}
		h.add(s, 10-float64(s), held)
	}
	return h
}

// TestResumedLossPlotCoversTheRun: without -loss-log, the -loss-plot of
// a resumed run drew only the steps after the resume. The training state
// now holds the loss history: the plot covers every step, as the
// uninterrupted run's does. A state saved before it did (no history)
// still resumes, and the plot and its message say which steps it covers.
func TestResumedLossPlotCoversTheRun(t *testing.T) {
	whole, wholeTitle, _ := plotted(t, parsePlotRun(t, plotRunArgs(t.TempDir())))
	require.Len(t, whole.train, 10)

	dir := t.TempDir()
	o := parsePlotRun(t, plotRunArgs(dir))
	o.stopAt = 5
	require.Error(t, run(o)) // status 130, the state after step 5 saved
	state := filepath.Join(dir, "s.safetensors")
	old := filepath.Join(dir, "old.safetensors")
	require.NoError(t, os.WriteFile(old, readFile(t, state), 0o644))

	h, title, _ := plotted(t, parsePlotRun(t, []string{"-device", "cpu", "-quiet", "-resume", state}))
	require.Equal(t, wholeTitle, title)
	require.Equal(t, 1, h.first())
	require.Len(t, h.train, len(whole.train))
	require.Len(t, h.heldOut, len(whole.heldOut))
	for i, xy := range h.train {
		require.Equal(t, whole.train[i].X, xy.X)
		require.InEpsilon(t, whole.train[i].Y, xy.Y, 1e-6, "step %v", xy.X) // float32 in the state
	}
	for i, xy := range h.heldOut {
		require.Equal(t, whole.heldOut[i].X, xy.X)
		require.InEpsilon(t, whole.heldOut[i].Y, xy.Y, 1e-6, "step %v", xy.X)
	}

	// A malformed history is refused, naming the key, as bad input.
	bad := filepath.Join(dir, "bad.safetensors")
	require.NoError(t, os.WriteFile(bad, readFile(t, old), 0o644))
	rewriteMetadata(t, bad, func(meta map[string]string) { meta[keyLossHistory] = "AAAA" })
	err := run(parsePlotRun(t, plotRunArgs(t.TempDir(), "-resume", bad)))
	requireBadInput(t, err, "-resume "+bad+": not a train-gpt training state file (metadata "+keyLossHistory+": not the training losses of steps 1 to 5 at most)")

	// A state of an older train-gpt: no loss history.
	rewriteMetadata(t, old, func(meta map[string]string) {
		delete(meta, keyLossFrom)
		delete(meta, keyLossHistory)
		delete(meta, keyHeldOutHist)
	})
	h, title, out := plotted(t, parsePlotRun(t, plotRunArgs(t.TempDir(), "-resume", old)))
	require.Equal(t, 6, h.first())
	require.Len(t, h.train, 5)
	require.Contains(t, title, "steps 6 to 10")
	require.Contains(t, out, "(steps 6 to 10 only: the training state resumed holds no loss history")
}

// A state saved for a failed evaluation (keyEvalDue) holds the history
// up to the step before: the resumed run logs that step again, once.
func TestLossHistoryBeforeEvalDue(t *testing.T) {
	h := fourStepHistory()
	var g lossHistory
	require.NoError(t, g.loadMetadata(h.metadata(3), 4))
	require.Equal(t, h.train[:3], g.train)
	require.Equal(t, h.heldOut[:1], g.heldOut)
	require.Error(t, g.loadMetadata(h.metadata(4), 3), "steps past the state's")
}
