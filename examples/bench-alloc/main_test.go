package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
)

const traceDir = "../../bench/traces"

func TestReplayPyTorchTrace(t *testing.T) {
	for _, c := range []struct {
		file                            string
		allocs                          int
		peakRequested, torchPeakReserve int64
	}{
		// The numbers DESIGN.md quotes: 2602.7 MiB and 2892 MiB; 717.5 and 766 MiB.
		{"trace-char-fp32.csv", 1654, 2729163592, 2892 << 20},
		{"trace-char-fp16-ckpt.csv", 3436, 752404344, 766 << 20},
	} {
		path := filepath.Join(traceDir, c.file)
		// Host memory stands in for the device: mmap reserves address
		// space, and the replay never touches the pages.
		res, err := replayTrace(path, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "both", reps: 1})
		require.NoError(t, err, c.file)
		assert.Equal(t, c.allocs, res.Allocs, c.file)
		assert.Zero(t, res.UnmatchedFrees, c.file)
		assert.Zero(t, res.LiveAtEnd, c.file)
		assert.Equal(t, c.peakRequested, res.PeakRequested, c.file)
		assert.Equal(t, c.torchPeakReserve, res.TorchPeakReserved, c.file)
		assert.GreaterOrEqual(t, res.TorchPeakReservedLowerBound, res.TorchPeakReserved, c.file)
		require.NotNil(t, res.Expandable, "the host backend has virtual memory")
		require.NotNil(t, res.Classic)
		for _, r := range []poolResult{*res.Classic, *res.Expandable} {
			assert.GreaterOrEqual(t, r.PeakAllocated, res.PeakRequested, "%s %s: rounding only adds", c.file, r.Mode)
			assert.GreaterOrEqual(t, r.PeakReserved, r.PeakAllocated, "%s %s", c.file, r.Mode)
			assert.InDelta(t, float64(r.PeakReserved)/float64(res.PeakRequested), r.Ratio, 1e-12, c.file)
			assert.Positive(t, r.NsPerCall)
			assert.Equal(t, 2*c.allocs, r.Calls)
		}
		// The classic pool keeps PyTorch's size classes and rules: on
		// these traces it must stay within 10% of PyTorch's lower bound.
		assert.Less(t, res.Classic.Ratio, 1.1*res.TorchRatioLowerBound, "%s: ours %.3f, PyTorch at least %.3f", c.file, res.Classic.Ratio, res.TorchRatioLowerBound)
		// Expandable segments: the goal.
		assert.LessOrEqual(t, res.Expandable.Ratio, 1.02, "%s: expandable segments reserve %.4f of the requested peak", c.file, res.Expandable.Ratio)
		t.Logf("%s: PyTorch %.3f (at least %.3f counting segments held before the trace), ours classic %.4f, expandable %.4f",
			c.file, res.TorchRatio, res.TorchRatioLowerBound, res.Classic.Ratio, res.Expandable.Ratio)
	}
}

func TestReadTraceErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, text, want string }{
		{"header", "op,addr,size,stream\n", "header"},
		{"action", "action,addr,size,stream\nalloc,1,512,0\nsteal,2,512,0\n", ":3: unknown action"},
		{"size", "action,addr,size,stream\nalloc,1,-4,0\n", ":2: size"},
		{"zero size", "action,addr,size,stream\nsnapshot,0,0,0\nalloc,1,0,0\n", ":3: size \"0\" of alloc must be a positive integer"},
		{"negative oom", "action,addr,size,stream\noom,1,-1,0\n", ":2: size \"-1\" of oom must be a non-negative integer"},
		{"past the end", "action,addr,size,stream\nsegment_map,18446744073709551615,2,0\n", ":2: segment_map at 0xffffffffffffffff of 2 bytes runs past the end"},
		{"addr", "action,addr,size,stream\nalloc,x,4,0\n", ":2: address"},
		{"fields", "action,addr,size,stream\nalloc,1,4\n", ":2: 3 fields, the header has 4"},
		{"empty", "action,addr,size,stream\n", "no events"},
		// These used to say "reading the header: EOF".
		{"empty file", "", ": no header line (an empty file, or empty lines only)"},
		{"empty lines", "\n \n\n", ": no header line (an empty file, or empty lines only)"},
	} {
		path := filepath.Join(dir, c.name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
		_, err := readTrace(path)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
		assert.True(t, strings.HasPrefix(err.Error(), path), "%s: the error names the file: %v", c.name, err)
	}
	_, err := readTrace(filepath.Join(dir, "missing.csv"))
	require.Error(t, err)
}

func TestReplayRejectsInconsistentTrace(t *testing.T) {
	evs := []traceEvent{{action: actAlloc, addr: 4096, size: 100}, {action: actAlloc, addr: 4096, size: 100}}
	_, _, _, err := scanTrace("dup.csv", evs, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "which is live")
	// A free of another size than the block's allocation.
	evs = []traceEvent{{action: actAlloc, addr: 4096, size: 100}, {action: actFreeCompleted, addr: 4096, size: 200}}
	_, _, _, err = scanTrace("size.csv", evs, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "frees address 0x1000 as 200 bytes, allocated as 100")
}

func TestBenchPairsCPU(t *testing.T) {
	var rep report
	require.NoError(t, benchPairs(nil, options{minTime: time.Millisecond, reps: 3, seed: 1}, &rep, io.Discard))
	require.Len(t, rep.Rows, 3*len(workloads), "pool, pool expandable and manager on every workload")
	for _, r := range rep.Rows {
		assert.Positive(t, r.NsPerPair, "%s/%s", r.Allocator, r.Workload)
		assert.Positive(t, r.Pairs, "%s/%s", r.Allocator, r.Workload)
		assert.Equal(t, 3, r.Reps)
		assert.True(t, r.NsMin <= r.NsPerPair && r.NsPerPair <= r.NsMax, "%s/%s: median %v outside [%v, %v]", r.Allocator, r.Workload, r.NsPerPair, r.NsMin, r.NsMax)
		assert.Zero(t, r.DriverCallsPerPair, "%s/%s: no driver on the CPU", r.Allocator, r.Workload)
		if r.Workload != "mixed" {
			assert.Zero(t, r.BackendAllocsPerPair, "%s/%s: a warm pool reuses its block", r.Allocator, r.Workload)
		}
	}
	assert.Nil(t, rep.Goal, "the goal compares with cuMemAllocAsync, which needs a GPU")
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{1, 2, 9}))
	assert.Equal(t, 2.5, median([]float64{1, 2, 3, 9}))
	assert.Equal(t, 4.0, median([]float64{4}))
}

func TestFlagErrors(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"-reps 0", "-reps 0"},
		{"-mintime 0s", "-mintime"},
		{"-device tpu", "want cuda or cpu"},
	} {
		err := mainErr(strings.Fields(c.args))
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want, c.args)
	}
}

func TestMixedSeqIsReproducible(t *testing.T) {
	a, b := newMixedSeq(7), newMixedSeq(7)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a.sizes, newMixedSeq(8).sizes)
	for i, n := range a.sizes {
		require.True(t, n >= mixedMin && n <= mixedMax, "size %d = %d", i, n)
		require.True(t, a.slots[i] >= 0 && a.slots[i] < liveSlots)
	}
}

func TestReplayPlots(t *testing.T) {
	dir := t.TempDir()
	res, err := replayTrace(filepath.Join(traceDir, "trace-char-fp32.csv"),
		func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "expandable", plots: dir, reps: 1})
	require.NoError(t, err)
	assert.Nil(t, res.Classic, "classic not replayed")
	require.NotNil(t, res.Expandable)
	for _, f := range []string{"trace-char-fp32-expandable.trace.json", "trace-char-fp32-expandable-timeline.png", "trace-char-fp32-expandable-segments.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Positive(t, st.Size(), f)
	}
	err = mainErr([]string{"-device", "cpu", "-segments", "some"})
	require.ErrorContains(t, err, "-segments")
}

func TestReplayScaled(t *testing.T) {
	path := filepath.Join(traceDir, "trace-char-fp16-ckpt.csv")
	host := func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }
	one, err := replayTrace(path, host, options{segments: "classic", reps: 1, scale: 1})
	require.NoError(t, err)
	half, err := replayTrace(path, host, options{segments: "classic", reps: 1, scale: 0.5})
	require.NoError(t, err)
	assert.Equal(t, 0.5, half.Scale)
	assert.InDelta(t, float64(one.PeakRequested)/2, float64(half.PeakRequested), float64(one.PeakRequested)/1000, "sizes halved")
	assert.Equal(t, one.TorchPeakReserved, half.TorchPeakReserved, "PyTorch's figures are the trace's")
	require.ErrorContains(t, mainErr([]string{"-device", "cpu", "-scale", "0"}), "-scale")
}

// The replay's times are appended in run order: median must not assume
// them sorted.
func TestMedianUnsorted(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{9, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{9, 3, 1, 2}))
	ns := []float64{9, 1, 2}
	median(ns)
	assert.Equal(t, []float64{9, 1, 2}, ns, "the caller's slice is left as it was")
}

// Flag errors exit with 2, -h with 0, failures of the run with 1, as
// train-gpt does.
func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args string
		code int
	}{
		{"-h", 0},
		{"-bogus", 2},
		{"-reps 0", 2},
		{"-device tpu", 2},
		{"-segments some", 2},
		{"extra", 2},
	} {
		err := mainErr(strings.Fields(c.args))
		require.Error(t, err, c.args)
		assert.Equal(t, c.code, cli.ExitCode(err), c.args)
	}
	assert.Equal(t, 0, cli.ExitCode(nil))
	assert.Equal(t, 1, cli.ExitCode(os.ErrNotExist))
}

// A trace without a single allocation has nothing to replay: its report
// would be all zeros (ratios over a peak of 0 bytes).
func TestReplayRejectsTraceWithoutAllocations(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"segments": "action,addr,size,stream\nsegment_alloc,4096,2097152,0\nsegment_free,4096,2097152,0\n",
		"frees":    "action,addr,size,stream\nfree_completed,4096,512,0\n",
	} {
		path := filepath.Join(dir, name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		_, err := replayTrace(path, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "both", reps: 1, scale: 1})
		require.ErrorContains(t, err, "no allocations", name)
	}
}

// -scale must not turn a huge allocation into a tiny one by overflowing
// the conversion back to an integer.
func TestReplayScaledOverflow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.csv")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,144115188075855872,0\nfree_completed,4096,144115188075855872,0\n"), 0o644))
	_, err := replayTrace(path, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "classic", reps: 1, scale: 64})
	require.ErrorContains(t, err, "-scale")
}

// -plots that cannot be written, a -trace that cannot be read or is
// malformed, and the flags that only a trace replay uses without any
// -trace are refused before any benchmark runs, naming the flag.
func TestFlagsCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	bad := filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(bad, []byte("action,addr,size,stream\nalloc,4096,512,0\nalloc,4096,512,0\n"), 0o644))
	trace := filepath.Join(traceDir, "trace-char-fp32.csv")
	other := filepath.Join(dir, "other")
	require.NoError(t, os.Mkdir(other, 0o755))
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(other, "trace-char-fp32.csv"), data, 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-plots", filepath.Join(file, "sub"), "-trace", trace}, "-plots"},
		{[]string{"-trace", filepath.Join(dir, "missing.csv")}, "-trace"},
		{[]string{"-trace", bad}, "which is live"},
		{[]string{"-no-bench"}, "-no-bench"},
		{[]string{"-plots", dir}, "-plots"},
		{[]string{"-scale", "2"}, "-scale"},
		{[]string{"-segments", "classic"}, "-segments"},
		{[]string{"-plan-steps"}, "-plan-steps"},
		{[]string{"-plan-steps", "-segments", "classic", "-trace", trace}, "-plan-steps"},
		{[]string{"-plan-steps=false", "-segments", "classic", "-trace", trace}, "-plan-steps"},
		// An empty folder was taken for no -plots: the run wrote no pictures.
		{[]string{"-plots", "", "-trace", trace}, "-plots: empty folder name"},
		{[]string{"-trace", trace, "-trace", ""}, "-trace: empty file name"},
		// Both would write trace-char-fp32-*.png into -plots, the second over the first.
		{[]string{"-plots", dir, "-trace", trace, "-trace", filepath.Join(other, "trace-char-fp32.csv")}, "-plots"},
	} {
		start := time.Now()
		// No -no-bench: the pairs would take seconds if they ran first.
		err := mainErr(append([]string{"-device", "cpu"}, c.args...))
		require.Error(t, err, "%q", c.args)
		assert.Contains(t, err.Error(), c.want, "%q", c.args)
		assert.Equal(t, 2, cli.ExitCode(err), "%q: %v", c.args, err)
		assert.Less(t, time.Since(start), 2*time.Second, "%q: refused before the benchmark", c.args)
	}
}

// With -segments expandable the classic pool does not run: the table
// must not print its figures as zeros.
func TestTableWithoutClassic(t *testing.T) {
	res, err := replayTrace(filepath.Join(traceDir, "trace-char-fp32.csv"),
		func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "expandable", reps: 1, scale: 1})
	require.NoError(t, err)
	var b strings.Builder
	printTables(&b, &report{Traces: []traceResult{res}})
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "| trace-char-fp32.csv") {
			assert.NotContains(t, line, "| 0 B | 0.0000 | 0 |", "classic not replayed: %s", line)
			return
		}
	}
	t.Fatalf("no row for the trace in\n%s", b.String())
}
