package tokenizer

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeFuzzListsEveryTarget: make fuzz runs "every fuzz target" (the
// Makefile's FUZZ list), but the list was written before this package's
// FuzzGPT2 and left it out: make fuzz never fuzzed the tokenizer.
func TestMakeFuzzListsEveryTarget(t *testing.T) {
	root := filepath.Join("..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^FUZZ\s*:=(.*)$`).FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile's FUZZ list")
	listed := strings.Fields(string(m[1]))
	slices.Sort(listed)

	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // a nested module: not in make fuzz's ./...
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, f := range fuzzFunc.FindAllSubmatch(src, -1) {
			found = append(found, "./"+filepath.ToSlash(rel)+":"+string(f[1]))
		}
		return nil
	}))
	slices.Sort(found)
	require.Contains(t, found, "./tokenizer:FuzzGPT2", "the walk finds this package's target")
	require.Equal(t, found, listed, "the Makefile's FUZZ: every fuzz target of the module")
}
