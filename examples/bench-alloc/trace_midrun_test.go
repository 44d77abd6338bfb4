package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// midRunTrace starts mid-run: blocks A (300 B at 1000000) and B (500 B
// at 3000000) were allocated before it, and it frees them (events 2 and
// 5) with their sizes. C (200 B) lies in no segment the trace reserves,
// D (1000 B) in the 4 KiB segment it does.
const midRunTrace = "action,addr,size,stream\n" +
	"alloc,2000000,200,0\n" + // 1: C
	"free_completed,1000000,300,0\n" + // 2: A, from before the trace
	"segment_alloc,65536,4096,0\n" + // 3
	"alloc,65536,1000,0\n" + // 4: D
	"free_completed,3000000,500,0\n" + // 5: B, from before the trace
	"free_requested,65536,1000,0\n" +
	"free_completed,65536,1000,0\n" + // 7: D
	"free_completed,2000000,200,0\n" // 8: C

// TestMidRunTraceLowerBounds: a trace that frees blocks allocated before
// it began had a peak live figure that left them out, and a PyTorch
// lower bound that left them out too, or was undefined (-1, "unknown")
// once it freed a segment from before it. The blocks are live from the
// trace's start until their frees: by hand, the bytes live after each
// event are (start) 800, 1000, 700, 700, 1700, 1200, 1200, 200, 0.
func TestMidRunTraceLowerBounds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mid.csv")
	require.NoError(t, os.WriteFile(path, []byte(midRunTrace), 0o644))
	host := func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }
	res, err := replayTrace(path, host, options{segments: "classic", reps: 1, scale: 1})
	require.NoError(t, err)
	assert.Equal(t, 2, res.UnmatchedFrees)
	assert.Equal(t, 2, res.Allocs)
	assert.EqualValues(t, 1200, res.PeakRequested, "C and D, what the replay requests")
	assert.EqualValues(t, 1700, res.PeakLiveLowerBound, "B, C and D after event 4; not A, freed by then")
	// Outside the trace's segments: A+B at the start, 800; with C, 1000
	// after event 1; 700, then 200 after B's free.
	assert.EqualValues(t, 1000, res.TorchPreexistingPeak)
	assert.EqualValues(t, 4096, res.TorchPeakReserved)
	assert.EqualValues(t, 4096+1000, res.TorchPeakReservedLowerBound, "no segment from before the trace is freed: the sum")
	assert.InDelta(t, 5096.0/1200, res.TorchRatioLowerBound, 1e-12)
	require.NotNil(t, res.Classic)
	assert.Equal(t, 4, res.Classic.Calls, "the frees of A and B are not replayed")

	// The table says so under the row.
	var b strings.Builder
	printTables(&b, &report{Traces: []traceResult{res}})
	assert.Contains(t, b.String(), "mid.csv: 2 frees of addresses not allocated in the trace at the time (blocks allocated before it began, or freed twice)")
	assert.Contains(t, b.String(), "at least 1.66 KiB were live at once (1700 bytes)")

	// Freeing the segment A was in (one held since before the trace):
	// those segments may not all have been held at the 4 KiB moment, so
	// the bound is the most at one moment of in-trace segments plus the
	// blocks outside them: 4096 + 200 (C) + 500 (B) after event 3.
	require.NoError(t, os.WriteFile(path, []byte(midRunTrace+"segment_free,1000000,2097152,0\n"), 0o644))
	res, err = replayTrace(path, host, options{segments: "classic", reps: 1, scale: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 1700, res.PeakLiveLowerBound)
	assert.EqualValues(t, 4096+700, res.TorchPeakReservedLowerBound, "defined, not -1")
	b.Reset()
	printTables(&b, &report{Traces: []traceResult{res}})
	assert.NotContains(t, b.String(), "unknown")

	// -scale scales the blocks from before the trace as the others;
	// PyTorch's figures stay those of the trace as recorded.
	res, err = replayTrace(path, host, options{segments: "classic", reps: 1, scale: 2})
	require.NoError(t, err)
	assert.EqualValues(t, 2400, res.PeakRequested)
	assert.EqualValues(t, 3400, res.PeakLiveLowerBound)
	assert.EqualValues(t, 1000, res.TorchPreexistingPeak)
	assert.EqualValues(t, 4096+700, res.TorchPeakReservedLowerBound)

	// A free of an address the trace already freed is no block from
	// before it: counted, but no bytes added.
	evs := []traceEvent{
		{action: actAlloc, addr: 4096, size: 100},
		{action: actFreeCompleted, addr: 4096, size: 100},
		{action: actFreeCompleted, addr: 4096, size: 100},
		{action: actFreeCompleted, addr: 8192, size: 50},
		{action: actFreeCompleted, addr: 8192, size: 50},
	}
	r, _, _, err := scanTrace("double.csv", evs, 1)
	require.NoError(t, err)
	assert.Equal(t, 3, r.UnmatchedFrees)
	assert.EqualValues(t, 150, r.PeakLiveLowerBound, "the 100 B block and one 50 B block from before")
}

// A trace that frees nothing from before it keeps its figures: the live
// peak is the peak requested, and PyTorch's lower bound is what it was
// (the numbers of the previous version on the recorded traces).
func TestWholeTraceLowerBoundsUnchanged(t *testing.T) {
	for _, c := range []struct {
		file                        string
		peakRequested, preexisting  int64
		torchReserved, torchAtLeast int64
	}{
		{"trace-char-fp32.csv", 2729163592, 2095672, 3032481792, 3034577464},
		{"trace-char-fp16-ckpt.csv", 752404344, 169181972, 803209216, 972391188},
	} {
		path := filepath.Join(traceDir, c.file)
		evs, err := readTrace(path)
		require.NoError(t, err)
		res, _, _, err := scanTrace(path, evs, 1)
		require.NoError(t, err)
		assert.Zero(t, res.UnmatchedFrees, c.file)
		assert.Equal(t, c.peakRequested, res.PeakRequested, c.file)
		assert.Equal(t, c.peakRequested, res.PeakLiveLowerBound, c.file)
		assert.Equal(t, c.preexisting, res.TorchPreexistingPeak, c.file)
		assert.Equal(t, c.torchReserved, res.TorchPeakReserved, c.file)
		assert.Equal(t, c.torchAtLeast, res.TorchPeakReservedLowerBound, c.file)
	}
}
