package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// requireBadInput: err ends the run with status 2 and a message holding
// each of want.
func requireBadInput(t *testing.T, err error, want ...string) {
	t.Helper()
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 2, ex.Code, ex.Msg)
	require.Equal(t, 2, cli.ExitCode(err))
	for _, w := range want {
		require.Contains(t, ex.Msg, w)
	}
}

// TestBadInputExitsTwo: input whose contents are wrong, found after the
// flags (an empty -data, a token file too short for the context, a
// training state or weights cut short, a text given as a state), is a
// bad input: status 2 and a message naming the file and what is wrong
// with it. They ended with status 1, and a truncated state's message
// said only "bad header: metadata incomplete buffer".
func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	common := []string{"-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-sample", "0", "-loss-plot", "off"}
	parse := func(args ...string) *options {
		t.Helper()
		o, err := parseFlags(append(append([]string{}, common...), args...))
		require.NoError(t, err)
		return o
	}

	empty := filepath.Join(dir, "empty.txt")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	requireBadInput(t, run(parse("-steps", "1", "-out", "", "-config", "char", "-data", empty)), "-data "+empty+": empty file (0 bytes)")
	short := filepath.Join(dir, "short.txt")
	require.NoError(t, os.WriteFile(short, []byte("a few bytes\n"), 0o644))
	requireBadInput(t, run(parse("-steps", "1", "-out", "", "-config", "char", "-data", short)), "-data "+short+": 12 tokens is too short")

	state := filepath.Join(dir, "s.safetensors")
	w := filepath.Join(dir, "w.safetensors")
	require.NoError(t, run(parse("-steps", "2", "-out", w, "-state", state, "-save-every", "1")))
	for _, c := range []struct {
		flag, file string
		cut        int // bytes kept: a header cut short, the data cut short
	}{
		{"-resume", state, 100},
		{"-resume", state, -100},
		{"-init", w, -1},
		{"-resume", state, 0},
	} {
		b, err := os.ReadFile(c.file)
		require.NoError(t, err)
		n := c.cut
		if n < 0 {
			n += len(b)
		}
		cut := filepath.Join(dir, "cut.safetensors")
		require.NoError(t, os.WriteFile(cut, b[:n], 0o644))
		want := "truncated"
		if n == 0 {
			want = "empty file (0 bytes)"
		}
		requireBadInput(t, run(parse("-steps", "4", "-out", "", c.flag, cut)), c.flag+" "+cut+": "+want)
	}
	// Not a safetensors file at all: a text given to -resume.
	requireBadInput(t, run(parse("-steps", "4", "-out", "", "-resume", short)), "-resume "+short+": not a safetensors file: a header of ")
}
