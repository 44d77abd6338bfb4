package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDefaultOutputsCleaned: the README's first command (and make run)
// writes its default outputs into the repository's root: the weights
// (-out), the loss plot beside them (-loss-plot's default) and, when
// interrupted, the training state (-state's default). make clean removes
// each, and .gitignore keeps each out of git status. It named only
// gpt.safetensors: a plain run left gpt.loss.png behind, untracked, after
// make clean.
func TestDefaultOutputsCleaned(t *testing.T) {
	o, err := parseFlags(nil)
	require.NoError(t, err)
	outs := []string{o.out, o.lossPlot, o.state}
	for _, p := range outs {
		require.NotEmpty(t, p)
		require.Equal(t, filepath.Base(p), p, "a default output in the working directory")
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	clean := regexp.MustCompile(`(?m)^clean:\n((?:\t.*\n)+)`).FindSubmatch(makefile)
	require.NotNil(t, clean, "the Makefile's clean target")
	ignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	require.NoError(t, err)
	ignored := strings.Fields(string(ignore))
	for _, p := range outs {
		require.Contains(t, strings.Fields(string(clean[1])), p, "make clean removes %s", p)
		require.Contains(t, ignored, "/"+p, ".gitignore names %s", p)
	}
}
