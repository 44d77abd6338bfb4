package main

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// TestInitOfStateRefusedUpFront: -init given a training state (-state's
// file, which -resume continues) is a bad flag, refused with the other
// checks of the files before any work (status 2), as generate -weights
// refuses one. It used to be found after -data was read and tokenized and
// the model made, and to end the run with status 1.
func TestInitOfStateRefusedUpFront(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "s.state.safetensors")
	common := []string{"-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-loss-plot", "off"}
	o, err := parseFlags(append([]string{"-steps", "1", "-out", "", "-save-every", "1", "-state", st}, common...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(append([]string{"-steps", "1", "-out", "", "-init", st, "-data", textFile(t), "-sample", "0"}, common...))
	require.NoError(t, err)
	out := captureStderr(t, func() { err = run(o) })
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 2, ex.Code)
	require.Contains(t, ex.Msg, "-init "+st+": a training state (after step 1), not weights: continue it with -resume")
	require.NotContains(t, out, "model:", "refused before the data is read and the model made")
}
