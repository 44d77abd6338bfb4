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

// Traces as a script like bench/torch_traces.py, or a variant of it, may
// write them: each must read as the same events as the plain form.
func TestReadTraceVariants(t *testing.T) {
	plain := "action,addr,size,stream\nalloc,4096,1024,94012345678\nsnapshot,0,0,0\nfree_completed,4096,1024,94012345678\n"
	want := []traceEvent{
		{action: actAlloc, addr: 4096, size: 1024, stream: 94012345678},
		{action: actSnapshot},
		{action: actFreeCompleted, addr: 4096, size: 1024, stream: 94012345678},
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, text string }{
		{"plain", plain},
		{"crlf", "action,addr,size,stream\r\nalloc,4096,1024,94012345678\r\nsnapshot,0,0,0\r\nfree_completed,4096,1024,94012345678\r\n"},
		// Saved by an editor or written with encoding="utf-8-sig".
		{"bom", "\ufeff" + plain},
		{"spaces and empty lines", "action, addr, size, stream\n\nalloc, 4096, 1024, 94012345678 \n snapshot,0,0,0\n\nfree_completed,4096,1024,94012345678\n\n"},
		// A line of blanks (an editor's indentation, a trailing tab) is an
		// empty line, not a record of the wrong number of fields.
		{"lines of blanks", "\n  \naction,addr,size,stream\nalloc,4096,1024,94012345678\n   \nsnapshot,0,0,0\n\t\nfree_completed,4096,1024,94012345678\n \n"},
		// PyTorch's trace entries have more keys than the four (time_us,
		// frames, compile_context, user_metadata, ...): a script that
		// writes some of them, or the four in another order.
		{"extra columns", "action,addr,size,stream,time_us,frames\nalloc,4096,1024,94012345678,17,\"[{'filename': 'a.py', 'line': 3}]\"\nsnapshot,0,0,0,18,\nfree_completed,4096,1024,94012345678,19,[]\n"},
		{"other order", "stream,size,action,addr\n94012345678,1024,alloc,4096\n0,0,snapshot,0\n94012345678,1024,free_completed,4096\n"},
	} {
		path := filepath.Join(dir, c.name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
		evs, err := readTrace(path)
		require.NoError(t, err, c.name)
		for i := range evs {
			assert.Positive(t, evs[i].line, c.name)
			evs[i].line = 0 // the lines differ between the variants
		}
		assert.Equal(t, want, evs, c.name)
	}
}

// PyTorch's own entries: an oom entry has no addr key (it is
// "device_free"), so a script writing the four columns with
// csv.DictWriter leaves the address empty; PyTorch writes the stream as a
// signed 64-bit integer; newer versions add user_defined entries
// (annotations). None is an allocation; all must be read.
func TestReadTracePyTorchEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\n"+
		"alloc,4096,1024,-5\noom,,1048576,0\nuser_defined,0,0,0\nfree_completed,4096,1024,-5\n"), 0o644))
	evs, err := readTrace(path)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	assert.Equal(t, traceEvent{action: actOOM, size: 1 << 20, line: 3}, evs[1])
	assert.Equal(t, actUserDefined, evs[2].action)
	assert.Equal(t, evs[0].stream, evs[3].stream)
	res, _, _, err := scanTrace(path, evs, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, res.TorchOOMs)
	assert.EqualValues(t, 1024, res.PeakRequested)

	// An allocation's address still may not be empty, and a header
	// without one of the four columns is refused by name.
	for name, text := range map[string]string{
		"empty addr": "action,addr,size,stream\nalloc,,1024,0\n",
		"no stream":  "action,addr,size\nalloc,4096,1024\n",
		"twice":      "action,addr,size,stream,addr\nalloc,4096,1024,0,4096\n",
	} {
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		_, err := readTrace(path)
		require.Error(t, err, name)
	}
}

// A trace that starts mid-run (or whose ring buffer dropped its start)
// can free segments PyTorch reserved before it began. Those bytes were
// never counted, so they must not be taken off: the 2 MiB segment
// reserved in the trace is PyTorch's peak in it, not 0.
func TestScanTraceFreesSegmentsFromBeforeTheTrace(t *testing.T) {
	evs := []traceEvent{
		{action: actSegmentFree, addr: 1 << 30, size: 20 << 20},
		{action: actSegmentAlloc, addr: 4096, size: 2 << 20},
		{action: actAlloc, addr: 4096, size: 1024},
		{action: actFreeCompleted, addr: 4096, size: 1024},
		// An unmap of an expandable segment partly mapped before the trace.
		{action: actSegmentMap, addr: 1 << 40, size: 4 << 20},
		{action: actSegmentUnmap, addr: 1<<40 - 2<<20, size: 4 << 20},
		{action: actSegmentMap, addr: 1 << 40, size: 2 << 20},
	}
	res, _, _, err := scanTrace("mid.csv", evs, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 2<<20+4<<20, res.TorchPeakReserved, "the 2 MiB segment and the 4 MiB map; the unmap takes off the 2 MiB of it mapped in the trace")
	// A segment from before the trace was freed, so the bytes reserved
	// before it may not all have been held at the 6 MiB moment: the bound
	// is the most at one moment of in-trace ranges plus blocks outside
	// them, here the 6 MiB alone (it used to be -1, undefined).
	assert.EqualValues(t, 6<<20, res.TorchPeakReservedLowerBound, "a segment from before the trace was freed")
}

// Segment events whose ranges overlap ones the trace holds (a lost
// segment_free, or two devices' traces in one file) count the bytes
// once: PyTorch cannot hold the same address twice.
func TestScanTraceOverlappingSegments(t *testing.T) {
	evs := []traceEvent{
		{action: actSegmentAlloc, addr: 4096, size: 2 << 20},
		{action: actSegmentAlloc, addr: 4096, size: 2 << 20},
		{action: actSegmentMap, addr: 4096 + 1<<20, size: 2 << 20},
		{action: actAlloc, addr: 4096, size: 1024},
		{action: actFreeCompleted, addr: 4096, size: 1024},
	}
	res, _, _, err := scanTrace("overlap.csv", evs, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 3<<20, res.TorchPeakReserved)
}

// A trace that starts mid-run says so under the table, not only in the
// JSON line: its peak requested misses the blocks live before it began.
func TestTableNotesFreesFromBeforeTheTrace(t *testing.T) {
	var b strings.Builder
	printTables(&b, &report{Traces: []traceResult{{File: "mid.csv", Allocs: 1, UnmatchedFrees: 3, PeakRequested: 1}}})
	assert.Contains(t, b.String(), "mid.csv: 3 frees of addresses not allocated in the trace at the time (blocks allocated before it began, or freed twice)")
}

// The errors of a trace's events that read well but make no sense
// together (an allocation at a live address, a free of another size)
// or that the pool refuses name the file and the line, as the errors of
// fields that do not parse do: they used to give the event's number,
// which the header and any empty lines put off the line.
func TestTraceErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text, want string }{
		{"live", "action,addr,size,stream\n\nalloc,4096,100,0\n\nalloc,4096,100,0\n", ":5: allocates address 0x1000, which is live"},
		{"free size", "action,addr,size,stream\nalloc,4096,100,0\n\n\nfree_completed,4096,200,0\n", ":5: frees address 0x1000 as 200 bytes, allocated as 100"},
		// The header's errors name its line too (empty lines before it are skipped).
		{"header", "\n\naction,addr,size\nalloc,4096,100\n", ":3: header is "},
		{"header twice", "action,addr,size,stream,size\n", ":1: header "},
		{"fields", "action,addr,size,stream\nalloc,4096,100,0\nalloc,8192,100\n", ":3: 3 fields, the header has 4"},
	} {
		path := filepath.Join(dir, c.name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
		_, err := loadTrace(path, 1)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), path+c.want, c.name)
	}
	// A size the host cannot hold: the replay's error names the line.
	path := filepath.Join(dir, "huge.csv")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,100,0\n\nalloc,8192,2305843009213693952,0\n"), 0o644))
	lt, err := loadTrace(path, 1)
	require.NoError(t, err)
	_, err = replay(path, &lt.res, lt.ops, lt.slots, memory.NewHostBackend(memory.TierDevice), false, false)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	assert.Contains(t, err.Error(), path+":4 (classic): ")
	assert.NotErrorIs(t, err, memory.ErrLeaked, "the blocks the failed replay left are freed, not reported as a leak")
}

// A size no pool takes (more than 2^62-1 bytes) is refused with the
// trace, before any benchmark runs, naming the file and line; it used to
// pass the check and fail only in the replay, after the benchmark.
func TestTraceRefusesSizesNoPoolTakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.csv")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,100,0\n\nalloc,8192,9223372036854775000,0\n"), 0o644))
	_, err := loadTrace(path, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":4: size 9223372036854775000 is more than the largest request")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,4611686018427387904,0\n"), 0o644))
	_, err = loadTrace(path, 1)
	require.ErrorContains(t, err, path+":2: size 4611686018427387904 is more than the largest request")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,4611686018427387903,0\n"), 0o644))
	_, err = loadTrace(path, 1)
	require.NoError(t, err, "the largest request")
	// 2^56 bytes, 64 times as large: 2^62, one more than the largest.
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,72057594037927936,0\n"), 0o644))
	_, err = loadTrace(path, 64)
	require.ErrorContains(t, err, path+":2: -scale 64 makes its allocation of 72057594037927936 bytes more than the largest size")
}

// Sizes each within the largest request can still come to more bytes at
// once than an int64 holds: frees of blocks from before the trace,
// segments, or the two with the trace's own blocks. Such a trace is
// refused, naming the event where it can; its figures used to wrap (a
// peak live lower bound of 100 bytes for three blocks of 2^62-1).
func TestScanTraceRefusesBytesThatOverflow(t *testing.T) {
	const big = 1<<62 - 1
	for _, c := range []struct {
		name string
		evs  []traceEvent
		want string
	}{
		{"frees from before", []traceEvent{
			{action: actAlloc, addr: 4096, size: 100, line: 2},
			{action: actFreeCompleted, addr: 1 << 40, size: big, line: 3},
			{action: actFreeCompleted, addr: 2 << 40, size: big, line: 4},
			{action: actFreeCompleted, addr: 3 << 40, size: big, line: 5},
		}, "t.csv:5: free_completed of 4611686018427387903 bytes brings the bytes held at once past"},
		{"segments", []traceEvent{
			{action: actSegmentAlloc, addr: 0, size: 1<<63 - 1, line: 2},
			{action: actSegmentMap, addr: 1 << 63, size: 1<<63 - 1, line: 3},
			{action: actAlloc, addr: 4096, size: 100, line: 4},
		}, "t.csv:3: segment_map of 9223372036854775807 bytes brings the bytes held at once past"},
		{"allocations", []traceEvent{
			{action: actAlloc, addr: 1 << 40, size: big, line: 2},
			{action: actAlloc, addr: 2 << 40, size: big, line: 3},
			{action: actAlloc, addr: 3 << 40, size: big, line: 4},
		}, "t.csv:4: alloc of 4611686018427387903 bytes brings the bytes held at once past"},
		// Each sum fits while the trace runs; the blocks from before it,
		// live from its start, do not fit with the peak of its own.
		{"from before with the peak", []traceEvent{
			{action: actAlloc, addr: 1 << 40, size: big, line: 2},
			{action: actAlloc, addr: 2 << 40, size: big, line: 3},
			{action: actFreeCompleted, addr: 1 << 40, size: big, line: 4},
			{action: actFreeCompleted, addr: 3 << 40, size: big, line: 5},
		}, "t.csv: the blocks freed that were allocated before it began"},
	} {
		_, _, _, err := scanTrace("t.csv", c.evs, 1)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}
