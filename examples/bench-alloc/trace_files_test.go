package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// endless is a stream of one byte that never ends, as a device or a
// pipe may be, up to limit bytes; past them its reads fail, so that a
// reader without a bound fails rather than reads forever.
type endless struct {
	b     byte
	limit int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.limit <= 0 {
		return 0, errors.New("read on past the limit: no bound on the line")
	}
	n := min(len(p), e.limit)
	for i := range n {
		p[i] = e.b
	}
	e.limit -= n
	return n, nil
}

func (e *endless) Close() error { return nil }

// TestTraceRefusesLongLines: a line longer than maxTraceLine is an error
// naming the file and the line, read no further; a line without end (a
// file of NULs, a stream with no newline) used to be read into memory
// whole, forever on a pipe. A line of maxTraceLine bytes is still read.
func TestTraceRefusesLongLines(t *testing.T) {
	dir := t.TempDir()
	row := "alloc,4096,512,0,"
	for _, c := range []struct{ name, text, want string }{
		{"nul", strings.Repeat("\x00", maxTraceLine+1), ":1: a line longer than 1048576 bytes"},
		{"row", "action,addr,size,stream,frames\nalloc,4096,512,0,[]\n" + row + strings.Repeat("x", maxTraceLine+1-len(row)) + "\n",
			":3: a line longer than 1048576 bytes"},
	} {
		path := filepath.Join(dir, c.name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
		_, err := readTrace(path)
		require.Error(t, err, c.name)
		require.Contains(t, err.Error()[:min(len(err.Error()), 300)], path+c.want, c.name)
	}
	path := filepath.Join(dir, "longest.csv")
	long := "free_completed,4096,512,0,"
	require.NoError(t, os.WriteFile(path, []byte("action,addr,size,stream,frames\n"+row+"[]\n"+
		long+strings.Repeat("x", maxTraceLine-len(long))+"\n"), 0o644))
	evs, err := readTrace(path)
	require.NoError(t, err, "a line of maxTraceLine bytes")
	assert.Len(t, evs, 2)

	open := openTrace
	t.Cleanup(func() { openTrace = open })
	openTrace = func(string) (io.ReadCloser, error) { return &endless{b: 'y', limit: 8 * maxTraceLine}, nil }
	_, err = readTrace("/dev/stream")
	require.ErrorContains(t, err, "/dev/stream:1: a line longer than 1048576 bytes")
}

// TestTraceErrorsCutLongFields: an error quotes at most maxQuoted bytes
// of a header or a field, however long the line: a one-line file (up to
// maxTraceLine bytes) used to be quoted whole in its header's error, as
// was a long field, twice for a number (strconv's error quotes it too).
func TestTraceErrorsCutLongFields(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("7", 100_000)
	for _, c := range []struct{ name, text, want string }{
		{"header", long + "\n", ":1: header is [\"777"},
		{"action", "action,addr,size,stream\n" + long + ",4096,512,0\n", ":2: unknown action \"777"},
		{"addr", "action,addr,size,stream\nalloc," + long + ",512,0\n", ":2: address \"777"},
		{"size", "action,addr,size,stream\nalloc,4096," + long + ",0\n", ":2: size \"777"},
		{"stream", "action,addr,size,stream\nalloc,4096,512," + long + "\n", ":2: stream \"777"},
	} {
		path := filepath.Join(dir, c.name+".csv")
		require.NoError(t, os.WriteFile(path, []byte(c.text), 0o644))
		_, err := readTrace(path)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), path+c.want, c.name)
		assert.Contains(t, err.Error(), "... (cut)", c.name)
		assert.Less(t, len(err.Error()), len(path)+300, c.name)
	}
}
