package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultPNGCleaned: the README's memstrategies command writes its
// bar chart, memstrategies.png, into the repository's root by default;
// make clean removes it and .gitignore keeps it out of git status (it
// was left behind, untracked).
func TestDefaultPNGCleaned(t *testing.T) {
	o, err := parse(nil, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, filepath.Base(o.pngOut), o.pngOut, "the default chart in the working directory")
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	clean := regexp.MustCompile(`(?m)^clean:\n((?:\t.*\n)+)`).FindSubmatch(makefile)
	require.NotNil(t, clean, "the Makefile's clean target")
	require.Contains(t, strings.Fields(string(clean[1])), o.pngOut, "make clean removes it")
	ignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	require.NoError(t, err)
	require.Contains(t, strings.Fields(string(ignore)), "/"+o.pngOut, ".gitignore names it")
}
