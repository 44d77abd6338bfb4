package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestNoBenchRefusesPairFlags: -seed and -mintime set only the
// allocation pairs; with -no-bench they were ignored, and are refused
// now (status 2, naming the flag), before any replay.
func TestNoBenchRefusesPairFlags(t *testing.T) {
	trace := filepath.Join(traceDir, "trace-char-fp32.csv")
	for _, c := range [][]string{{"-seed", "7"}, {"-mintime", "1s"}} {
		start := time.Now()
		err := mainErr(append([]string{"-device", "cpu", "-no-bench", "-trace", trace}, c...))
		require.Error(t, err, "%q", c)
		assert.Contains(t, err.Error(), c[0]+": only for the allocation pairs, which -no-bench skips", "%q", c)
		assert.Equal(t, 2, cli.ExitCode(err), "%q", c)
		assert.Less(t, time.Since(start), 2*time.Second, "%q: refused before the replay", c)
	}
}

// failWriter fails every write, as stdout on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestResultsWriteFailure: JSON lines going to a stdout that fails are a
// failure of the run (status 1) naming stdout; they used to be lost with
// status 0. The tables on stderr likewise.
func TestResultsWriteFailure(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "tiny.csv")
	require.NoError(t, os.WriteFile(trace, []byte("action,addr,size,stream\nalloc,4096,512,0\nfree_completed,4096,512,0\n"), 0o644))
	args := []string{"-device", "cpu", "-no-bench", "-reps", "1", "-segments", "classic", "-trace", trace}
	var out, tables bytes.Buffer
	require.NoError(t, mainTo(args, &out, &tables))
	require.Contains(t, out.String(), `"bench":"bench-alloc-trace"`)
	err := mainTo(args, failWriter{}, &tables)
	require.ErrorContains(t, err, "writing the results to stdout: no space left on device")
	assert.Equal(t, 1, cli.ExitCode(err))
	err = mainTo(args, &out, failWriter{})
	require.ErrorContains(t, err, "writing the tables to stderr")
	assert.Equal(t, 1, cli.ExitCode(err))
}

// TestDeviceUnusable: -device cuda without a usable GPU is a bad flag
// (status 2), decided before any work, saying what is wrong; it used to
// exit 1.
func TestDeviceUnusable(t *testing.T) {
	if _, err := gpu(); err == nil {
		t.Skip("a GPU is usable here")
	}
	err := mainTo([]string{"-device", "cuda"}, failWriter{}, failWriter{})
	require.ErrorContains(t, err, "-device cuda: no usable GPU: ")
	assert.Equal(t, 2, cli.ExitCode(err))
}

// TestClassicLeftOutWhenNotReplayed: with -segments expandable the trace's
// JSON line has no "classic" replay; it used to hold one of zeros
// ("mode":""), read as a replay that reserved nothing. A default run's
// line keeps it.
func TestClassicLeftOutWhenNotReplayed(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "tiny.csv")
	require.NoError(t, os.WriteFile(trace, []byte("action,addr,size,stream\nalloc,4096,512,0\nfree_completed,4096,512,0\n"), 0o644))
	line := func(args ...string) map[string]json.RawMessage {
		var out bytes.Buffer
		require.NoError(t, mainTo(append([]string{"-device", "cpu", "-no-bench", "-reps", "1", "-trace", trace}, args...), &out, io.Discard))
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(out.Bytes(), &m))
		return m
	}
	m := line("-segments", "expandable")
	assert.NotContains(t, m, "classic")
	assert.Contains(t, m, "expandable")
	m = line()
	require.Contains(t, m, "classic")
	var c poolResult
	require.NoError(t, json.Unmarshal(m["classic"], &c))
	assert.Equal(t, "classic", c.Mode)
	assert.Positive(t, c.PeakReserved)
	m = line("-segments", "classic")
	assert.Contains(t, m, "classic")
	assert.NotContains(t, m, "expandable")
}

// TestPairRowsGoToStderrWriter: the rows printed while the pairs are
// timed go to the writer run is given for stderr, with the tables; they
// used to go to os.Stderr, out of reach of a caller (or a test) that
// redirects it. The program still writes them to stderr (mainErr).
func TestPairRowsGoToStderrWriter(t *testing.T) {
	var out, tables bytes.Buffer
	require.NoError(t, mainTo([]string{"-device", "cpu", "-mintime", "1ms", "-reps", "1"}, &out, &tables))
	for _, w := range workloads {
		assert.Regexp(t, `(?m)^pool +`+w.name+` .* ns/pair \(median of 1 runs of `, tables.String())
		assert.Regexp(t, `(?m)^manager +`+w.name+` .* ns/pair \(median of 1 runs of `, tables.String())
	}
	assert.NotContains(t, out.String(), "ns/pair (", "the JSON line only on stdout")
}
