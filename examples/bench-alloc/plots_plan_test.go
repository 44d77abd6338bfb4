package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// The plots of an expandable replay are of the replay the table reports:
// planned as it is (-plan-steps, on by default). They used to come from a
// replay without the plan, whose peak reserved bytes are another figure.
func TestReplayPlotsArePlanned(t *testing.T) {
	host := func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }
	for _, plan := range []bool{true, false} {
		dir := t.TempDir()
		res, err := replayTrace(filepath.Join(traceDir, "trace-char-fp16-ckpt.csv"), host,
			options{segments: "expandable", plots: dir, reps: 1, plan: plan})
		require.NoError(t, err)
		require.NotNil(t, res.Expandable)
		data, err := os.ReadFile(filepath.Join(dir, "trace-char-fp16-ckpt-expandable.trace.json"))
		require.NoError(t, err)
		var tr struct {
			TraceEvents []struct {
				Name string
				Ph   string
				Args map[string]any
			}
		}
		require.NoError(t, json.Unmarshal(data, &tr))
		var peak int64
		for _, e := range tr.TraceEvents {
			if e.Ph == "C" && e.Name == "reserved" {
				peak = max(peak, int64(e.Args["bytes"].(float64)))
			}
		}
		assert.Equal(t, res.Expandable.PeakReserved, peak, "plan %v: the plotted replay's peak reserved bytes", plan)
	}
}
