package memviz_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

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

// TestTimesGoingBack: a history whose event times go back (made by hand
// or merged from two recordings; a recorder's never do) is refused with
// an error that names the event. WriteChromeTrace looped for ever on one
// (a slice's duration went negative and its shortening loop never ended;
// a reviewer helper found it in session 40).
func TestTimesGoingBack(t *testing.T) {
	h := &memory.History{Events: []memory.Event{
		{Seq: 0, Time: 1100, Kind: memory.EventAlloc, Tier: memory.TierDevice, Role: memory.RoleActivation, Addr: 0x1000, Size: 100, Block: 512},
		{Seq: 1, Time: 300, Kind: memory.EventMark, Op: "step"},
	}}
	done := make(chan error, 1)
	go func() { done <- memviz.WriteChromeTrace(&bytes.Buffer{}, h, memviz.TraceOptions{}) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "event 1 (seq 1) at 300 ns")
	case <-time.After(10 * time.Second):
		t.Fatal("WriteChromeTrace still running after 10 s")
	}
	require.ErrorIs(t, memviz.WriteTimelinePNG(&bytes.Buffer{}, h, memviz.PlotOptions{}), memory.ErrInvalidArgument)
}
