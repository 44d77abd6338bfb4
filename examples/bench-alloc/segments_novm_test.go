package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// classicOnly is a backend without the virtual memory API (a GPU without
// it, or STRATA_EXPANDABLE_SEGMENTS=0): it hides the host backend's.
type classicOnly struct{ memory.Backend }

// TestSegmentsExpandableWithoutVirtualMemory: -segments expandable over a
// backend without virtual memory replays nothing, and is refused naming
// the flag; it used to report the trace with neither replay, status 0.
// With -segments both the classic replay runs alone, as the JSON line's
// doc says.
func TestSegmentsExpandableWithoutVirtualMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream\nalloc,4096,512,0\nfree_completed,4096,512,0\n"), 0o644))
	backend := func() memory.Backend { return classicOnly{memory.NewHostBackend(memory.TierDevice)} }
	_, err := replayTrace(path, backend, options{segments: "expandable", reps: 1, scale: 1})
	require.ErrorContains(t, err, "-segments expandable: host(device) has no virtual memory for expandable segments")
	res, err := replayTrace(path, backend, options{segments: "both", reps: 1, scale: 1})
	require.NoError(t, err)
	require.NotNil(t, res.Classic)
	require.Nil(t, res.Expandable)
}
