package memviz_test

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/vg"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// oneAlloc is a history and a snapshot of a manager that allocated and
// freed one block.
func oneAlloc(t *testing.T) (*memory.History, memory.Snapshot) {
	m := memory.NewHostManager(memory.Config{})
	m.RecordHistory(0)
	a, err := m.Alloc(1000, memory.RoleActivation)
	require.NoError(t, err)
	s := m.Snapshot()
	require.NoError(t, a.Free())
	return m.History(), s
}

// Picture sizes the PNG writers cannot draw (negative or NaN sizes, a
// negative DPI, a picture of more pixels than memory should hold) are
// errors wrapping memory.ErrInvalidArgument that name the option, not a
// panic inside the plotting library ("DPI must be > 0.", "makeslice: len
// out of range") or an allocation of gigabytes.
func TestPlotOptionsRefused(t *testing.T) {
	h, s := oneAlloc(t)
	for name, o := range map[string]memviz.PlotOptions{
		"DPI":    {DPI: -1},
		"Width":  {Width: -5},
		"Height": {Height: vg.Length(math.NaN())},
		"pixels": {Width: 1e9, Height: 1e9},
	} {
		for fn, write := range map[string]func(*bytes.Buffer) error{
			"WriteTimelinePNG":   func(b *bytes.Buffer) error { return memviz.WriteTimelinePNG(b, h, o) },
			"WriteSegmentMapPNG": func(b *bytes.Buffer) error { return memviz.WriteSegmentMapPNG(b, s, o) },
		} {
			var b bytes.Buffer
			var err error
			require.NotPanics(t, func() { err = write(&b) }, "%s, %s", fn, name)
			require.ErrorIs(t, err, memory.ErrInvalidArgument, "%s, %s", fn, name)
			assert.Contains(t, err.Error(), "memviz: "+fn, name)
			assert.Contains(t, err.Error(), name, fn)
			assert.Zero(t, b.Len(), "%s, %s: nothing written", fn, name)
		}
	}
	// The defaults and ordinary sizes still draw.
	for _, o := range []memviz.PlotOptions{{}, {Width: 300, Height: 200, DPI: 300}} {
		var b bytes.Buffer
		require.NoError(t, memviz.WriteTimelinePNG(&b, h, o))
		_, err := png.Decode(&b)
		require.NoError(t, err)
		b.Reset()
		require.NoError(t, memviz.WriteSegmentMapPNG(&b, s, o))
		_, err = png.Decode(&b)
		require.NoError(t, err)
	}
}

// PeakEvent of a tier that does not exist is 0, as for a tier no event
// raised, not an index out of range.
func TestPeakEventUnknownTier(t *testing.T) {
	h, _ := oneAlloc(t)
	require.NotZero(t, memviz.PeakEvent(h, memory.TierDevice), "activations live in the device tier")
	require.NotPanics(t, func() { assert.Zero(t, memviz.PeakEvent(h, memory.NumTiers)) })
	require.NotPanics(t, func() { assert.Zero(t, memviz.PeakEvent(h, memory.Tier(200))) })
}

// A history or snapshot made by hand with a tier or role that does not
// exist is an error naming the event or block, not an index out of range.
func TestUnknownTierOrRole(t *testing.T) {
	h, s := oneAlloc(t)
	for name, edit := range map[string]func(e *memory.Event){
		"tier 7":  func(e *memory.Event) { e.Tier = 7 },
		"role 99": func(e *memory.Event) { e.Role = 99 },
	} {
		bad := *h
		bad.Events = append([]memory.Event(nil), h.Events...)
		for i := range bad.Events {
			if bad.Events[i].Kind == memory.EventAlloc {
				edit(&bad.Events[i])
			}
		}
		var b bytes.Buffer
		for fn, call := range map[string]func() error{
			"WriteChromeTrace": func() error { return memviz.WriteChromeTrace(&b, &bad, memviz.TraceOptions{}) },
			"WriteTimelinePNG": func() error { return memviz.WriteTimelinePNG(&b, &bad, memviz.PlotOptions{}) },
			"Window":           func() error { _, err := memviz.Window(&bad, "", ""); return err },
			"SnapshotAt":       func() error { _, err := memviz.SnapshotAt(s, &bad, len(bad.Events)); return err },
		} {
			var err error
			require.NotPanics(t, func() { err = call() }, "%s, %s", fn, name)
			require.ErrorIs(t, err, memory.ErrInvalidArgument, "%s, %s", fn, name)
			assert.Contains(t, err.Error(), "memviz: "+fn, name)
			assert.Contains(t, err.Error(), name, fn)
		}
		require.NotPanics(t, func() { memviz.PeakEvent(&bad, memory.TierDevice) }, name)
		require.NotPanics(t, func() { memviz.WindowTime(&bad, 1, 0) }, name)
	}
	bad := s
	bad.Tiers = append([]memory.TierSnapshot(nil), s.Tiers...)
	for i := range bad.Tiers {
		ts := &bad.Tiers[i]
		ts.Segments = append([]memory.SegmentInfo(nil), ts.Segments...)
		for j := range ts.Segments {
			seg := &ts.Segments[j]
			seg.Blocks = append([]memory.BlockInfo(nil), seg.Blocks...)
			for k := range seg.Blocks {
				if seg.Blocks[k].Live {
					seg.Blocks[k].Role = 99
				}
			}
		}
	}
	var b bytes.Buffer
	var err error
	require.NotPanics(t, func() { err = memviz.WriteSegmentMapPNG(&b, bad, memviz.PlotOptions{}) })
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "role 99")
}

// SnapshotAt's start snapshot made by hand with a tier that does not
// exist, for the tier or for one of its segments, is an error too; the
// former used to be an index out of range, the latter's segment was
// dropped without a word.
func TestSnapshotAtUnknownTier(t *testing.T) {
	h, s := oneAlloc(t)
	for name, edit := range map[string]func(ts *memory.TierSnapshot){
		"tier 7": func(ts *memory.TierSnapshot) { ts.Tier = 7 },
		"tier 9": func(ts *memory.TierSnapshot) { ts.Segments[0].Tier = 9 },
	} {
		bad := s
		bad.Tiers = append([]memory.TierSnapshot(nil), s.Tiers...)
		for i := range bad.Tiers {
			if ts := &bad.Tiers[i]; len(ts.Segments) > 0 {
				ts.Segments = append([]memory.SegmentInfo(nil), ts.Segments...)
				edit(ts)
				break
			}
		}
		var err error
		require.NotPanics(t, func() { _, err = memviz.SnapshotAt(bad, h, len(h.Events)) }, name)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "memviz: SnapshotAt", name)
		assert.Contains(t, err.Error(), name)
	}
}

// A history without events writes a valid Chrome trace; the PNG writers
// say there is nothing to draw, as the package doc has it.
func TestEmptyHistory(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	m.RecordHistory(0)
	m.MarkHistory("step 1")
	for _, h := range []*memory.History{{}, m.History()} {
		var b bytes.Buffer
		require.NoError(t, memviz.WriteChromeTrace(&b, h, memviz.TraceOptions{}))
		require.True(t, json.Valid(b.Bytes()), b.String())
		b.Reset()
		require.ErrorContains(t, memviz.WriteTimelinePNG(&b, h, memviz.PlotOptions{}), "nothing to plot")
	}
	var b bytes.Buffer
	require.ErrorContains(t, memviz.WriteSegmentMapPNG(&b, m.Snapshot(), memviz.PlotOptions{}), "nothing to draw")
	require.NoError(t, memviz.WriteSnapshotJSON(&b, m.Snapshot()))
	require.True(t, json.Valid(b.Bytes()))
}
