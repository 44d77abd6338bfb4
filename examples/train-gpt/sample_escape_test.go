package main

import (
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
	var err error
	b := captureStderr(t, func() {
		var o *options
		if o, err = parseFlags([]string{"-data", text, "-steps", "1", "-batch", "2", "-sample", "5", "-device", "cpu", "-quiet", "-out", "", "-loss-plot", "off"}); err == nil {
			err = run(o)
		}
	})
	require.NoError(t, err)
	_, sample, ok := strings.Cut(b, "sample (prompt from held-out text")
	require.True(t, ok, "%s", b)
	require.NotContains(t, sample, "\x1b")
	require.NotContains(t, sample, "\r")
	require.Contains(t, sample, `\x1b[31mRED\x1b[0m\r`)
}
