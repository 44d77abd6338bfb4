package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestWeightsNotARegularFile: -weights that is a named pipe or an open
// pipe (/dev/stdin under `cat w |`) is refused as a bad flag, unopened:
// opening the fifo blocked forever, and an open pipe was read twice (the
// second read, of what was left, failed with "header too large").
func TestWeightsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "w.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	pipe := fmt.Sprintf("/proc/self/fd/%d", r.Fd())
	for _, path := range []string{fifo, pipe} {
		errc := make(chan error, 1)
		go func() {
			_, err := parseFlags([]string{"-weights", path, "-prompt", "hi"}, io.Discard)
			errc <- err
		}()
		select {
		case err := <-errc:
			var u cli.UsageError
			require.True(t, errors.As(err, &u), "%s: %v", path, err)
			require.EqualError(t, err, "-weights: "+path+" is not a regular file (a named pipe)")
		case <-time.After(10 * time.Second):
			if wr, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				wr.Close() // let a blocked open go
			}
			w.Close()
			t.Fatalf("parseFlags(-weights %s) still blocked after 10 s", path)
		}
	}
}
