package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// A run that fails leaves -json and -png as they were: it used to
// truncate -json when it started, losing an earlier run's lines.
func TestFailedRunKeepsOutputs(t *testing.T) {
	dir := t.TempDir()
	png, js := filepath.Join(dir, "m.png"), filepath.Join(dir, "m.jsonl")
	require.NoError(t, os.WriteFile(js, []byte("old\n"), 0o644))
	o, err := parse([]string{"-config", "tiny", "-steps", "1", "-warmup", "0", "-strategies", "device", "-png", png, "-json", js}, &bytes.Buffer{})
	require.NoError(t, err)
	m := tensor.CPU().Memory()
	m.FailAllocation(1)
	defer m.FailAllocation(0)
	require.Error(t, run(o, tensor.CPU(), &bytes.Buffer{}, &bytes.Buffer{}))
	data, err := os.ReadFile(js)
	require.NoError(t, err)
	require.Equal(t, "old\n", string(data))
	require.Equal(t, []string{"m.jsonl"}, testfs.Names(t, dir), "no -png, no temporary file")
}
