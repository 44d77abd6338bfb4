package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestPlotWriteErrorReportsNoLeak: a picture that cannot be written (here
// its name is taken by a directory) fails the run with that error alone.
// The blocks a trace leaves live at its end used to stay allocated on
// that return, and the pool's Close added "closed with 1 live blocks ...:
// memory leaked" to it, a leak that was not there.
func TestPlotWriteErrorReportsNoLeak(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "live.csv")
	require.NoError(t, os.WriteFile(trace, []byte("action,addr,size,stream\nalloc,4096,100,0\nalloc,8192,200,0\nfree_completed,4096,100,0\n"), 0o644))
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "live-classic.trace.json"), 0o755))
	res, err := replayTrace(trace, func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "classic", plots: dir, reps: 1})
	require.Equal(t, 1, res.LiveAtEnd)
	require.ErrorContains(t, err, "live-classic.trace.json is a directory")
	require.NotErrorIs(t, err, memory.ErrLeaked)
	require.NotContains(t, err.Error(), "live blocks")
}
