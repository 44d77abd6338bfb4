package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/memory"
)

// TestInterruptDuringPlots: SIGINT while -plots writes a picture ends the
// run with status 130, the picture abandoned (or, if the signal came as
// it ended, whole) and no temporary file left; the pictures after it are
// not written. The signal used to end the process in the middle of the
// write, leaving the picture's temporary file (.NAME.tmp-*) behind. Here
// the test holds SIGINT itself (signal.Notify), so that without the
// handling the process lives on and the run just ends with status 0; the
// first picture's write sends the signal and waits until it is delivered.
func TestInterruptDuringPlots(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT)
	defer signal.Stop(sigs)
	prev := writePlot
	t.Cleanup(func() { writePlot = prev })
	writes := 0
	writePlot = func(ctx context.Context, path string, write func(io.Writer) error) error {
		if writes++; writes == 1 {
			require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
			<-sigs
		}
		return prev(ctx, path, write)
	}
	dir := t.TempDir()
	_, err := replayTrace(filepath.Join(traceDir, "trace-char-fp32.csv"),
		func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }, options{segments: "classic", plots: dir, reps: 1})
	require.Error(t, err)
	require.Equal(t, 130, cli.ExitCode(err), "%v", err)
	assert.Contains(t, err.Error(), "writing "+filepath.Join(dir, "trace-char-fp32-classic.trace.json"))
	assert.Equal(t, 1, writes, "no picture after the interrupted one")
	for _, name := range testfs.Names(t, dir) {
		assert.False(t, strings.Contains(name, ".tmp-"), "temporary file %s left", name)
	}
}
