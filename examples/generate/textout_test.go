package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestTextOut: generated text goes to a terminal escaped (a model's ESC
// acted on it), to a file or pipe as it is.
func TestTextOut(t *testing.T) {
	var buf bytes.Buffer
	require.Same(t, &buf, textOut(&buf))
	tty, err := os.OpenFile("/dev/null", os.O_WRONLY, 0) // a character device, as a terminal is
	require.NoError(t, err)
	defer tty.Close()
	e, ok := textOut(tty).(*cli.Escaper)
	require.True(t, ok)
	require.Equal(t, tty, e.W)
	f, err := os.Create(t.TempDir() + "/out.txt")
	require.NoError(t, err)
	defer f.Close()
	require.Equal(t, f, textOut(f))
}
