package memviz_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// A nil history or writer is an error naming the function, not a crash.
func TestNilArguments(t *testing.T) {
	var buf bytes.Buffer
	h := &memory.History{}
	for name, call := range map[string]func() error{
		"WriteChromeTrace nil history":  func() error { return memviz.WriteChromeTrace(&buf, nil, memviz.TraceOptions{}) },
		"WriteChromeTrace nil writer":   func() error { return memviz.WriteChromeTrace(nil, h, memviz.TraceOptions{}) },
		"WriteTimelinePNG nil history":  func() error { return memviz.WriteTimelinePNG(&buf, nil, memviz.PlotOptions{}) },
		"WriteTimelinePNG nil writer":   func() error { return memviz.WriteTimelinePNG(nil, h, memviz.PlotOptions{}) },
		"WriteSegmentMapPNG nil writer": func() error { return memviz.WriteSegmentMapPNG(nil, memory.Snapshot{}, memviz.PlotOptions{}) },
		"WriteSnapshotJSON nil writer":  func() error { return memviz.WriteSnapshotJSON(nil, memory.Snapshot{}) },
		"Window nil history":            func() error { _, err := memviz.Window(nil, "", ""); return err },
		"SnapshotAt nil history":        func() error { _, err := memviz.SnapshotAt(memory.Snapshot{}, nil, 0); return err },
	} {
		err := call()
		require.Error(t, err, name)
		assert.ErrorIs(t, err, memory.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "memviz: "+strings.Fields(name)[0], name)
	}
	assert.Nil(t, memviz.WindowTime(nil, 0, 0))
	assert.Zero(t, memviz.PeakEvent(nil, memory.TierDevice))
}
