package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// -out records the addition task's -digits (generate -addition asks
// problems of those digits by default); a run on -data records none.
func TestWeightsRecordDigits(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	o, err := parseFlags([]string{"-steps", "1", "-batch", "2", "-digits", "4", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", w})
	require.NoError(t, err)
	require.NoError(t, run(o))
	md, err := tensor.ReadSafetensorsMetadata(w)
	require.NoError(t, err)
	require.Equal(t, "4", md["digits"])

	text := filepath.Join(dir, "text.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("the quick brown fox jumps over the lazy dog\n", 100)), 0o644))
	o, err = parseFlags([]string{"-data", text, "-steps", "1", "-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-sample", "0", "-out", w})
	require.NoError(t, err)
	require.NoError(t, run(o))
	md, err = tensor.ReadSafetensorsMetadata(w)
	require.NoError(t, err)
	require.NotContains(t, md, "digits")
}
