package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadable: only regular files pass, and a pipe is refused without
// being opened (which would block with no writer) or read.
func TestReadable(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(f, []byte("x"), 0o644))
	require.NoError(t, Readable(f))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	pipe := fmt.Sprintf("/proc/self/fd/%d", r.Fd()) // what /dev/stdin is under `cat x |`
	for path, want := range map[string]string{
		dir:         dir + " is a directory",
		fifo:        fifo + " is not a regular file (a named pipe)",
		pipe:        pipe + " is not a regular file (a named pipe)",
		"/dev/zero": "/dev/zero is not a regular file (a device)",
	} {
		require.EqualError(t, Readable(path), want)
	}
	require.ErrorIs(t, Readable(filepath.Join(dir, "none")), os.ErrNotExist)
}
