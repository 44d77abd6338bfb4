package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestSaveDoesNotRecordGuessedHeads: a file without a config and no
// -heads, -config or config.json gets heads of width 64, a guess its
// message says -heads changes. -save recorded the guess as the model's
// config in the file it wrote, which then read as the file's own shape:
// the right -heads was refused as disagreeing with the metadata, and the
// guess was no longer said to be one.
func TestSaveDoesNotRecordGuessedHeads(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 256, Context: 8, Layers: 1, Heads: 4, Width: 64}
	_, bare := testWeights(t, cfg, false, nn.LayoutNanoGPT)
	saved := filepath.Join(t.TempDir(), "s.safetensors")
	_, errs, err := runArgs(t, "-weights", bare, "-save", saved)
	require.NoError(t, err)
	require.Contains(t, errs, "1 heads", "guessed: width 64 / 64")
	_, errs, err = runArgs(t, "-weights", saved, "-heads", "4", "-prompt", "1", "-max-new", "2")
	require.NoError(t, err, "the right -heads for the saved file")
	require.Contains(t, errs, "4 heads")
	// Heads that were given are recorded.
	withHeads := filepath.Join(t.TempDir(), "h.safetensors")
	_, _, err = runArgs(t, "-weights", bare, "-heads", "4", "-save", withHeads)
	require.NoError(t, err)
	_, errs, err = runArgs(t, "-weights", withHeads, "-prompt", "1", "-max-new", "2")
	require.NoError(t, err)
	require.Contains(t, errs, "4 heads, width 64, context 8, vocabulary 256 (shape from the file's metadata)")
}
