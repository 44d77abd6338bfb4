package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSampleEscaped: the sample printed at the end shows the control
// characters of the text (its prompt is held-out text) escaped: raw, an
// ESC acted on the terminal.
func TestSampleEscaped(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "esc.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("red \x1b[31mRED\x1b[0m\r\n", 400)), 0o644))
	log, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	defer log.Close()
	stderr := os.Stderr
	os.Stderr = log
	o, err := parseFlags([]string{"-data", text, "-steps", "1", "-batch", "2", "-sample", "5", "-device", "cpu", "-quiet", "-out", "", "-loss-plot", "off"})
	if err == nil {
		err = run(o)
	}
	os.Stderr = stderr
	require.NoError(t, err)
	b, err := os.ReadFile(log.Name())
	require.NoError(t, err)
	_, sample, ok := bytes.Cut(b, []byte("sample (prompt from held-out text"))
	require.True(t, ok, "%s", b)
	require.NotContains(t, string(sample), "\x1b")
	require.NotContains(t, string(sample), "\r")
	require.Contains(t, string(sample), `\x1b[31mRED\x1b[0m\r`)
}
