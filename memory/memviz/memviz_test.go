package memviz_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// gptLike runs steps training steps of a made-up GPT's allocation pattern
// on a host manager that records its history: parameters and optimizer
// state made once, then per step activations kept layer by layer through
// the forward pass, temporaries and workspaces, gradients made and the
// activations freed through the backward pass, an optimizer update. It
// returns the manager, with a snapshot taken in the last step once the
// logits are made.
func gptLike(t testing.TB, steps int) (*memory.Manager, memory.Snapshot) {
	m, snaps := gptLikeSnaps(t, steps)
	return m, snaps.mid
}

// stepSnaps are snapshots of gptLike's last step: at its start and once
// the logits are made, with the number of history events before each.
type stepSnaps struct {
	start, mid   memory.Snapshot
	nStart, nMid int
}

func gptLikeSnaps(t testing.TB, steps int) (*memory.Manager, stepSnaps) {
	m := memory.NewHostManager(memory.Config{})
	m.RecordHistory(0)
	alloc := func(n int64, r memory.Role, op string) *memory.Allocation {
		a, err := m.AllocOp(n, r, 0, op)
		require.NoError(t, err)
		return a
	}
	const layers, width = 6, 384
	var params, moments []*memory.Allocation
	params = append(params, alloc(256*width*4, memory.RoleEmbedding, "wte"))
	for range layers {
		for _, n := range []int64{width * 3 * width * 4, width * width * 4, width * 4 * width * 4, 4 * width * width * 4, width * 4} {
			params = append(params, alloc(n, memory.RoleParameter, "param"))
		}
	}
	for _, p := range params {
		moments = append(moments, alloc(p.Size(), memory.RoleOptimizerState, "adamw.m"), alloc(p.Size(), memory.RoleOptimizerState, "adamw.v"))
	}
	var snaps stepSnaps
	act := int64(64 * 256 * width * 4)
	for s := range steps {
		if s == steps-1 {
			snaps.start, snaps.nStart = m.Snapshot(), len(m.History().Events)
		}
		m.MarkHistory(fmt.Sprintf("step %d", s+1))
		x := alloc(64*256*4, memory.RoleStaging, "input")
		var saved []*memory.Allocation
		for range layers {
			saved = append(saved, alloc(act, memory.RoleActivation, "layernorm"), alloc(3*act, memory.RoleActivation, "matmul"))
			tmp := alloc(act*2, memory.RoleActivation, "softmax")
			ws := alloc(8<<20, memory.RoleWorkspace, "cublas")
			saved = append(saved, alloc(4*act, memory.RoleActivation, "gelu"))
			require.NoError(t, tmp.Free())
			require.NoError(t, ws.Free())
		}
		logits := alloc(64*256*256*4, memory.RoleActivation, "lm_head")
		if s == steps-1 {
			snaps.mid, snaps.nMid = m.Snapshot(), len(m.History().Events)
		}
		var grads []*memory.Allocation
		for _, p := range params {
			grads = append(grads, alloc(p.Size(), memory.RoleGradient, "grad"))
		}
		require.NoError(t, logits.Free())
		for i := len(saved) - 1; i >= 0; i-- {
			g := alloc(saved[i].Size(), memory.RoleGradient, "backward")
			require.NoError(t, saved[i].Free())
			require.NoError(t, g.Free())
		}
		for _, g := range grads {
			require.NoError(t, g.Free())
		}
		require.NoError(t, x.Free())
	}
	m.MarkHistory("end")
	for _, a := range append(params, moments...) {
		require.NoError(t, a.Free())
	}
	return m, snaps
}

// out is where the pictures go: $MEMVIZ_OUT to look at them, else a
// temporary folder.
func out(t *testing.T) string {
	if d := os.Getenv("MEMVIZ_OUT"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// validateTraceEvents checks a Chrome trace-event JSON file against the
// format (the "JSON Object Format" of the Trace Event Format document, as
// Perfetto reads it): a traceEvents array of objects with a string name
// and ph; numeric pid and tid; a non-negative numeric ts except on
// metadata; phases among those the format defines; complete events with a
// non-negative dur; counters with numeric args; instant events with scope
// g, p or t; metadata naming a process or thread. Per track (a process's
// counter of one name; a thread's slices and instants) ts never goes
// back, and slices on one thread nest or follow each other. It returns
// the events by phase.
func validateTraceEvents(t *testing.T, data []byte) map[string][]map[string]any {
	var f map[string]any
	require.NoError(t, json.Unmarshal(data, &f), "valid JSON")
	raw, ok := f["traceEvents"].([]any)
	require.True(t, ok, "a traceEvents array")
	require.NotEmpty(t, raw)
	if u, ok := f["displayTimeUnit"]; ok {
		assert.Contains(t, []any{"ms", "ns"}, u)
	}
	byPh := map[string][]map[string]any{}
	lastTs := map[string]float64{}
	sliceEnds := map[string][]float64{} // open slices' ends per thread
	for i, r := range raw {
		e, ok := r.(map[string]any)
		require.True(t, ok, "event %d is an object", i)
		name, ok := e["name"].(string)
		require.True(t, ok, "event %d: string name", i)
		ph, ok := e["ph"].(string)
		require.True(t, ok, "event %d: string ph", i)
		require.Contains(t, []string{"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"}, ph, "event %d: phase", i)
		pid, ok := e["pid"].(float64)
		require.True(t, ok, "event %d: numeric pid", i)
		tid, ok := e["tid"].(float64)
		require.True(t, ok, "event %d: numeric tid", i)
		byPh[ph] = append(byPh[ph], e)
		if ph == "M" {
			require.Contains(t, []string{"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}, name)
			_, ok := e["args"].(map[string]any)
			require.True(t, ok, "metadata %d has args", i)
			continue
		}
		ts, ok := e["ts"].(float64)
		require.True(t, ok, "event %d: numeric ts", i)
		require.GreaterOrEqual(t, ts, 0.0)
		track := fmt.Sprintf("%v/%v", pid, tid)
		switch ph {
		case "C":
			track = fmt.Sprintf("%v/C/%s", pid, name)
			args, ok := e["args"].(map[string]any)
			require.True(t, ok && len(args) > 0, "counter %d has args", i)
			for k, v := range args {
				_, ok := v.(float64)
				require.True(t, ok, "counter %d: arg %s is a number", i, k)
			}
		case "X":
			dur, ok := e["dur"].(float64)
			require.True(t, ok, "slice %d has a numeric dur", i)
			require.GreaterOrEqual(t, dur, 0.0)
			ends := sliceEnds[track]
			for len(ends) > 0 && ends[len(ends)-1] <= ts {
				ends = ends[:len(ends)-1]
			}
			if len(ends) > 0 {
				require.LessOrEqual(t, ts+dur, ends[len(ends)-1], "slice %d (%s) overlaps the one before on %s without nesting", i, name, track)
			}
			sliceEnds[track] = append(ends, ts+dur)
		case "i", "I":
			s, _ := e["s"].(string)
			require.Contains(t, []string{"", "g", "p", "t"}, s, "instant %d scope", i)
		}
		if last, ok := lastTs[track]; ok {
			require.GreaterOrEqual(t, ts, last, "event %d (%s): ts goes back on track %s", i, name, track)
		}
		lastTs[track] = ts
	}
	return byPh
}

func TestChromeTraceIsValidAndTrue(t *testing.T) {
	m, _ := gptLike(t, 3)
	defer m.Close()
	h := m.History()
	var buf bytes.Buffer
	require.NoError(t, memviz.WriteChromeTrace(&buf, h, memviz.TraceOptions{Largest: 40}))
	require.NoError(t, os.WriteFile(filepath.Join(out(t), "gptlike.trace.json"), buf.Bytes(), 0o644))
	byPh := validateTraceEvents(t, buf.Bytes())
	assert.Len(t, byPh["X"], 40, "the 40 largest allocations")
	assert.NotEmpty(t, byPh["C"])
	var marks []string
	for _, e := range byPh["i"] {
		if e["cat"] == "mark" {
			marks = append(marks, e["name"].(string))
		}
	}
	assert.Equal(t, []string{"step 1", "step 2", "step 3", "end"}, marks)
	// The largest allocation is named by the op that made it.
	var biggest map[string]any
	for _, e := range byPh["X"] {
		if biggest == nil || e["args"].(map[string]any)["block"].(float64) > biggest["args"].(map[string]any)["block"].(float64) {
			biggest = e
		}
	}
	assert.Equal(t, "gelu", biggest["args"].(map[string]any)["op"])
	assert.Equal(t, "activation", biggest["cat"])
	// The device tier's last counters equal the manager's figures.
	st := m.Stats().Tiers[memory.TierDevice]
	var lastAlloc, lastRes, peak float64
	for _, e := range byPh["C"] {
		if e["pid"].(float64) != float64(memory.TierDevice)+1 {
			continue
		}
		v := e["args"].(map[string]any)["bytes"]
		switch e["name"] {
		case "allocated":
			lastAlloc = v.(float64)
			peak = max(peak, lastAlloc)
		case "reserved":
			lastRes = v.(float64)
		}
	}
	assert.Equal(t, float64(st.Allocated.Current), lastAlloc)
	assert.Equal(t, float64(st.Reserved.Current), lastRes)
	assert.Equal(t, float64(st.Allocated.Peak), peak)
}

func TestWindowBetweenMarks(t *testing.T) {
	m, _ := gptLike(t, 3)
	defer m.Close()
	h := m.History()
	w, err := memviz.Window(h, "step 2", "step 3")
	require.NoError(t, err)
	assert.Equal(t, "step 2", w.Events[0].Op)
	assert.Equal(t, "step 3", w.Events[len(w.Events)-1].Op)
	// Parameters and optimizer state are live before the window.
	assert.Positive(t, w.Before[memory.TierDevice].Allocated[memory.RoleOptimizerState])
	_, err = memviz.Window(h, "step 9", "")
	assert.Error(t, err)
	var buf bytes.Buffer
	require.NoError(t, memviz.WriteChromeTrace(&buf, w, memviz.TraceOptions{}))
	validateTraceEvents(t, buf.Bytes())
	all := memviz.WindowTime(h, 0, 0)
	assert.Len(t, all.Events, len(h.Events))
}

// decodePNG decodes a picture and counts the pixels of each colour.
func decodePNG(t *testing.T, data []byte) (image.Image, map[color.RGBA]int) {
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	counts := map[color.RGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}]++
		}
	}
	return img, counts
}

func TestTimelinePNG(t *testing.T) {
	m, _ := gptLike(t, 3)
	defer m.Close()
	w, err := memviz.Window(m.History(), "step 1", "end")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, memviz.WriteTimelinePNG(&buf, w, memviz.PlotOptions{Title: "gpt-like workload, 3 steps (host backends)", ByEvent: true}))
	require.NoError(t, os.WriteFile(filepath.Join(out(t), "gptlike-timeline.png"), buf.Bytes(), 0o644))
	img, counts := decodePNG(t, buf.Bytes())
	assert.Greater(t, img.Bounds().Dx(), 800)
	// The big bands are there: activations and optimizer state.
	assert.Greater(t, counts[color.RGBA{0xff, 0x7f, 0x0e, 0xff}], 1000, "activation orange")
	assert.Greater(t, counts[color.RGBA{0x2c, 0xa0, 0x2c, 0xff}], 1000, "optimizer green")

	var small bytes.Buffer
	require.NoError(t, memviz.WriteTimelinePNG(&small, m.History(), memviz.PlotOptions{MaxPoints: 20}))
	_, err = png.Decode(&small)
	require.NoError(t, err)
	assert.Error(t, memviz.WriteTimelinePNG(&small, &memory.History{}, memviz.PlotOptions{}))
}

func TestSegmentMapPNGAndSnapshotJSON(t *testing.T) {
	m, snap := gptLike(t, 2)
	defer m.Close()
	var buf bytes.Buffer
	require.NoError(t, memviz.WriteSegmentMapPNG(&buf, snap, memviz.PlotOptions{Title: "gpt-like workload at its peak (host backends)"}))
	require.NoError(t, os.WriteFile(filepath.Join(out(t), "gptlike-segments.png"), buf.Bytes(), 0o644))
	_, counts := decodePNG(t, buf.Bytes())
	assert.Greater(t, counts[color.RGBA{0xff, 0x7f, 0x0e, 0xff}], 1000, "activation orange")
	assert.Greater(t, counts[color.RGBA{0xd9, 0xd9, 0xd9, 0xff}], 100, "free grey")

	var js bytes.Buffer
	require.NoError(t, memviz.WriteSnapshotJSON(&js, snap))
	require.NoError(t, os.WriteFile(filepath.Join(out(t), "gptlike-snapshot.json"), js.Bytes(), 0o644))
	var back memory.Snapshot
	require.NoError(t, json.Unmarshal(js.Bytes(), &back))
	require.Len(t, back.Tiers, len(snap.Tiers))
	assert.Equal(t, snap.Tiers[1].Segments, back.Tiers[1].Segments, "the JSON round-trips")
	assert.Error(t, memviz.WriteSegmentMapPNG(&buf, memory.Snapshot{}, memviz.PlotOptions{}))
}

// bySegAddr sorts a tier's segments by address, nil for none.
func bySegAddr(segs []memory.SegmentInfo) []memory.SegmentInfo {
	if len(segs) == 0 {
		return nil
	}
	out := slices.Clone(segs)
	slices.SortFunc(out, func(a, b memory.SegmentInfo) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

func TestSnapshotAtRebuildsAMoment(t *testing.T) {
	m, s := gptLikeSnaps(t, 2)
	defer m.Close()
	h := m.History()
	rest := *h
	rest.Events = h.Events[s.nStart:]
	for _, c := range []struct {
		n    int
		want memory.Snapshot
	}{{s.nMid - s.nStart, s.mid}, {0, s.start}} {
		got, err := memviz.SnapshotAt(s.start, &rest, c.n)
		require.NoError(t, err)
		require.Len(t, got.Tiers, len(c.want.Tiers))
		for i, want := range c.want.Tiers {
			g := got.Tiers[i]
			assert.Equal(t, want.Tier, g.Tier)
			assert.Equal(t, want.Backend, g.Backend)
			assert.Equal(t, want.Usage.Allocated.Current, g.Usage.Allocated.Current, "%s", want.Tier)
			assert.Equal(t, want.Usage.Reserved.Current, g.Usage.Reserved.Current, "%s", want.Tier)
			if !assert.True(t, reflect.DeepEqual(bySegAddr(want.Segments), bySegAddr(g.Segments)), "%s after %d events: every segment and block", want.Tier, c.n) {
				return
			}
		}
	}
	_, err := memviz.SnapshotAt(s.start, &rest, len(rest.Events)+1)
	assert.Error(t, err)
	// The peak of the step is early in the backward pass.
	w, err := memviz.Window(h, "step 2", "end")
	require.NoError(t, err)
	peak := memviz.PeakEvent(w, memory.TierDevice)
	assert.Equal(t, "backward", w.Events[peak-1].Op, "the first gradient of the backward pass, the logits freed")
}

// TestChromeTraceOfEmptyHistory: a history with no events (a recording
// just started) still gives a trace whose traceEvents is an array, as the
// format requires, not null.
func TestChromeTraceOfEmptyHistory(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	m.RecordHistory(0)
	for _, h := range []*memory.History{m.History(), {}} {
		var buf bytes.Buffer
		require.NoError(t, memviz.WriteChromeTrace(&buf, h, memviz.TraceOptions{}))
		var f map[string]any
		require.NoError(t, json.Unmarshal(buf.Bytes(), &f), "valid JSON")
		evs, ok := f["traceEvents"].([]any)
		assert.True(t, ok, "a traceEvents array: %s", buf.String())
		assert.Empty(t, evs)
	}
}

// TestWindowFromStartToFirstEvent: with from "" the window starts at the
// history's start, so a mark labelled to that is the first event ends it.
func TestWindowFromStartToFirstEvent(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	m.RecordHistory(0)
	m.MarkHistory("step 1")
	a, err := m.Alloc(4096, memory.RoleActivation)
	require.NoError(t, err)
	require.NoError(t, a.Free())
	m.MarkHistory("step 1")
	w, err := memviz.Window(m.History(), "", "step 1")
	require.NoError(t, err)
	require.Len(t, w.Events, 1, "up to the first mark step 1")
	assert.Equal(t, memory.EventMark, w.Events[0].Kind)
}

// TestChromeTraceAdjacentSlices: an allocation made at the very time the
// one before it on its lane was freed starts where that one ends; in
// floating point, 0.1 µs + 0.2 µs passes 0.3 µs, and the first slice
// used to overlap the second without nesting. Op names and mark labels
// with quotes, newlines and bytes that are not UTF-8 stay valid JSON.
func TestChromeTraceAdjacentSlices(t *testing.T) {
	ev := func(seq uint64, tm int64, k memory.EventKind, allocSeq uint64, op string) memory.Event {
		return memory.Event{Seq: seq, Time: tm, Kind: k, Tier: memory.TierDevice, Role: memory.RoleActivation, Addr: 1 << 30,
			Size: 1 << 20, Block: 1 << 20, AllocSeq: allocSeq, Op: op}
	}
	h := &memory.History{Capacity: 16, Events: []memory.Event{
		{Seq: 0, Kind: memory.EventReserve, Tier: memory.TierDevice, Addr: 1 << 30, Size: 2 << 20, Segment: 1 << 30, SegmentSize: 2 << 20},
		ev(1, 100, memory.EventAlloc, 0, "a \"quoted\"\nop\u2028\xff"),
		ev(2, 300, memory.EventFree, 1, ""),
		ev(3, 300, memory.EventAlloc, 0, "b"),
		ev(4, 500, memory.EventFree, 3, ""),
		{Seq: 5, Time: 600, Kind: memory.EventMark, Op: "step \"1\"\n"},
	}}
	var buf bytes.Buffer
	require.NoError(t, memviz.WriteChromeTrace(&buf, h, memviz.TraceOptions{}))
	byPh := validateTraceEvents(t, buf.Bytes())
	require.Len(t, byPh["X"], 2)
	for _, e := range byPh["X"] {
		assert.Equal(t, 1.0, e["tid"], "one lane: the second allocation starts as the first ends")
	}
	assert.Equal(t, "a \"quoted\"\nop\u2028\ufffd", byPh["X"][0]["args"].(map[string]any)["op"])
}
