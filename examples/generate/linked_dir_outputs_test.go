package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestOutputsThroughLinkedDirectoryRefused: -save and -dump-logits that
// do not exist yet but name one file, through a symbolic link to its
// directory, were taken for two files (cli.SamePath compared their
// paths, and could not stat them): the logits' JSON replaced the saved
// weights, silently. They are refused as the same file.
func TestOutputsThroughLinkedDirectoryRefused(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(dir, link))
	save, dump := filepath.Join(dir, "out.safetensors"), filepath.Join(link, "out.safetensors")
	_, err := parseFlags([]string{"-weights", w, "-save", save, "-dump-logits", dump}, io.Discard)
	require.ErrorContains(t, err, "-dump-logits "+dump+": the same file as -save")
	// Another name in the same directory is another file.
	_, err = parseFlags([]string{"-weights", w, "-save", save, "-dump-logits", filepath.Join(link, "logits.json")}, io.Discard)
	require.NoError(t, err)
}
