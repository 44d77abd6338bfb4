package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumedLossPlotSaysWhyStepsAreMissing: a state saved after more
// than maxSavedLosses steps holds the last maxSavedLosses of them only,
// and the -loss-plot message of a run resumed from it said the earlier
// steps were missing because the state was saved by an older train-gpt.
// It now says the history was trimmed; and for a state whose history
// starts late (its run resumed from a state that held none), that it
// holds the losses from that step on. (The cap is lowered to 4 here.)
func TestResumedLossPlotSaysWhyStepsAreMissing(t *testing.T) {
	defer func(n int) { maxSavedLosses = n }(maxSavedLosses)
	maxSavedLosses = 4
	dir := t.TempDir()
	state := filepath.Join(dir, "s.safetensors")
	o := parsePlotRun(t, plotRunArgs(dir))
	o.stopAt = 7
	require.Error(t, run(o)) // status 130, the state after step 7 saved: steps 4 to 7 in its history
	old := filepath.Join(dir, "old.safetensors")
	require.NoError(t, os.WriteFile(old, readFile(t, state), 0o644))

	h, title, out := plotted(t, parsePlotRun(t, []string{"-device", "cpu", "-quiet", "-resume", state}))
	require.Equal(t, 4, h.first())
	require.Len(t, h.train, 7)
	require.Contains(t, title, "steps 4 to 10")
	require.Contains(t, out, "(steps 4 to 10 only: the training state resumed holds the losses of its last 4 steps only (a state keeps no more), and no -loss-log has the earlier steps)")
	require.NotContains(t, out, "older train-gpt")

	// A state of an older train-gpt (no history), resumed up to step 9
	// and saved: its history holds steps 8 and 9.
	rewriteMetadata(t, old, func(meta map[string]string) {
		delete(meta, keyLossFrom)
		delete(meta, keyLossHistory)
		delete(meta, keyHeldOutHist)
	})
	o = parsePlotRun(t, []string{"-device", "cpu", "-quiet", "-resume", old, "-state", state})
	o.stopAt = 9
	require.Error(t, run(o))
	_, title, out = plotted(t, parsePlotRun(t, []string{"-device", "cpu", "-quiet", "-resume", state}))
	require.Contains(t, title, "steps 8 to 10")
	require.Contains(t, out, "(steps 8 to 10 only: the training state resumed holds the losses from step 8 on only, and no -loss-log has the earlier steps)")
}
