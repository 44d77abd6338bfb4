package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestTraceRefusesDevicesAndDirectories: a -trace that is a device or a
// directory is refused by name before it is read; -trace /dev/zero used
// to read forever, and a directory failed on its read with the header's
// error. A FIFO, as -trace <(zcat t.csv.gz) gives, is still read.
func TestTraceRefusesDevicesAndDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "traces.csv")
	require.NoError(t, os.Mkdir(dir, 0o755))
	paths := map[string]string{dir: " is a directory"}
	if _, err := os.Stat(os.DevNull); err == nil {
		paths[os.DevNull] = " is not a regular file (a device)"
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths["/dev/zero"] = " is not a regular file (a device)"
	}
	for path, want := range paths {
		f, err := openTrace(path)
		if err == nil {
			f.Close()
		}
		require.ErrorContains(t, err, path+want, "opened, to be read")
		err = mainErr([]string{"-device", "cpu", "-no-bench", "-trace", path})
		require.ErrorContains(t, err, "-trace: "+path+want)
		assert.Equal(t, 2, cli.ExitCode(err), path)
	}

	fifo := filepath.Join(t.TempDir(), "fifo.csv")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	go os.WriteFile(fifo, []byte("action,addr,size,stream\nalloc,4096,512,0\n"), 0o644)
	evs, err := readTrace(fifo)
	require.NoError(t, err)
	assert.Len(t, evs, 1)
}
