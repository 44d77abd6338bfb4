package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

func TestRangeSet(t *testing.T) {
	var s rangeSet
	assert.EqualValues(t, 100, s.add(100, 100)) // [100,200)
	assert.EqualValues(t, 100, s.add(300, 100)) // [100,200) [300,400)
	assert.EqualValues(t, 50, s.add(150, 100))  // [100,250) [300,400)
	assert.EqualValues(t, 50, s.add(250, 50))   // touching both: [100,400)
	assert.Equal(t, []addrRange{{100, 400}}, s.r)
	assert.True(t, s.contains(100))
	assert.True(t, s.contains(399))
	assert.False(t, s.contains(400))
	assert.False(t, s.contains(99))

	// A removal that splits a range, and one that reaches past it.
	assert.EqualValues(t, 100, s.remove(200, 100)) // [100,200) [300,400)
	assert.Equal(t, []addrRange{{100, 200}, {300, 400}}, s.r)
	assert.False(t, s.contains(250))
	assert.EqualValues(t, 100, s.remove(150, 200)) // [100,150) [350,400)
	assert.Equal(t, []addrRange{{100, 150}, {350, 400}}, s.r)
	assert.EqualValues(t, 0, s.remove(500, 10), "nothing there")
	assert.EqualValues(t, 0, s.add(100, 50), "already there")
	assert.EqualValues(t, 100, s.remove(0, 1000))
	assert.Empty(t, s.r)
}

// Traces recorded with expandable_segments:True map and unmap pieces of
// segments, and every trace may hold snapshot and oom events: the replay
// takes them all, and counts PyTorch's reserved bytes from the mappings.
func TestReplayExpandableTraceActions(t *testing.T) {
	const page = 2 << 20
	text := "action,addr,size,stream\n" +
		"snapshot,0,0,0\n" +
		"segment_map,2097152,4194304,0\n" + // pages 1 and 2
		"alloc,2097152,1048576,0\n" +
		"alloc,3145728,1048576,0\n" +
		"segment_unmap,4194304,2097152,0\n" + // page 2, not where the blocks are
		"free_requested,2097152,1048576,0\n" +
		"free_completed,2097152,1048576,0\n" +
		"oom,1073741824,8589934592,0\n" +
		"oom,1073741824,0,0\n" +
		"free_requested,3145728,1048576,0\n" +
		"free_completed,3145728,1048576,0\n" +
		"segment_unmap,2097152,2097152,0\n"
	path := filepath.Join(t.TempDir(), "expandable.csv")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	res, err := replayTrace(path, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "both", reps: 1, scale: 1})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Allocs)
	assert.Equal(t, 2, res.TorchOOMs)
	assert.EqualValues(t, 2<<20, res.PeakRequested)
	assert.EqualValues(t, 2*page, res.TorchPeakReserved)
	assert.Zero(t, res.TorchPreexistingPeak, "both blocks lie in mapped memory")
	assert.EqualValues(t, 2*page, res.TorchPeakReservedLowerBound)

	// Unmapping memory the trace never showed mapped means PyTorch held
	// some before it began, not necessarily all at its in-trace peak: the
	// bound is then what was held at one moment, here the 512-byte block
	// in that memory (it used to be -1, undefined).
	text = "action,addr,size,stream\nalloc,2097152,512,0\nfree_completed,2097152,512,0\nsegment_unmap,2097152,2097152,0\n"
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	res, err = replayTrace(path, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "classic", reps: 1, scale: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 512, res.TorchPreexistingPeak)
	assert.EqualValues(t, 512, res.TorchPeakReservedLowerBound)
}

// The set against a byte map, over random adds and removes: the searches
// that start overlap and remove must not skip a range.
func TestRangeSetRandom(t *testing.T) {
	const size = 256
	var s rangeSet
	var in [size]bool
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 20000 {
		lo := rng.IntN(size)
		n := 1 + rng.IntN(min(16, size-lo))
		var before int64
		for a := lo; a < lo+n; a++ {
			if in[a] {
				before++
			}
		}
		add := rng.IntN(2) == 0
		if add {
			require.Equal(t, int64(n)-before, s.add(uint64(lo), int64(n)), "step %d: add [%d,%d)", step, lo, lo+n)
		} else {
			require.Equal(t, before, s.remove(uint64(lo), int64(n)), "step %d: remove [%d,%d)", step, lo, lo+n)
		}
		for a := lo; a < lo+n; a++ {
			in[a] = add
		}
		probe := rng.IntN(size)
		require.Equal(t, in[probe], s.contains(uint64(probe)), "step %d: contains %d", step, probe)
		for i := 1; i < len(s.r); i++ {
			require.Less(t, s.r[i-1].end, s.r[i].start, "step %d: ranges disjoint, sorted and merged: %v", step, s.r)
		}
	}
}
