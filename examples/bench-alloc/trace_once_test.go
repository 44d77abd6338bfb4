package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTraceReadOnce: each -trace is opened and parsed once, for the
// check before the benchmark and the replay alike, even when named twice:
// a trace on a pipe or a FIFO (-trace /dev/stdin, -trace <(zcat t.csv.gz))
// can be read only once, and a second read of a large one is time lost.
// Here a second open of a path fails, as a drained pipe would; a trace
// named twice used to be read twice.
func TestTraceReadOnce(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.csv"), filepath.Join(dir, "b.csv")
	require.NoError(t, os.WriteFile(a, []byte("action,addr,size,stream\nalloc,4096,512,0\nfree_completed,4096,512,0\n"), 0o644))
	require.NoError(t, os.WriteFile(b, []byte("action,addr,size,stream\nalloc,4096,512,0\nalloc,8192,1024,0\nfree_completed,4096,512,0\nfree_completed,8192,1024,0\n"), 0o644))
	opens := map[string]int{}
	open := openTrace
	t.Cleanup(func() { openTrace = open })
	openTrace = func(path string) (io.ReadCloser, error) {
		if opens[path]++; opens[path] > 1 {
			return nil, fmt.Errorf("%s: opened a second time, and a pipe would be empty", path)
		}
		return open(path)
	}
	var out bytes.Buffer
	require.NoError(t, mainTo([]string{"-device", "cpu", "-no-bench", "-reps", "1", "-segments", "classic",
		"-trace", a, "-trace", b, "-trace", a}, &out, io.Discard))
	assert.Equal(t, map[string]int{a: 1, b: 1}, opens)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, "one JSON line per -trace, the one named twice included")
	var got []string
	for _, line := range lines {
		var tr traceResult
		require.NoError(t, json.Unmarshal([]byte(line), &tr))
		got = append(got, fmt.Sprintf("%s %d", tr.File, tr.PeakRequested))
	}
	assert.Equal(t, []string{"a.csv 512", "b.csv 1536", "a.csv 512"}, got)
}
