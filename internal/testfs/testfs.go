// Package testfs holds the file-system helpers the tests of several
// packages share: what a directory holds after a program wrote (or
// refused to write) into it, so that a test can say that a failure or a
// refused flag left no file, temporary or partial, behind; and safetensors
// files with a header entry edited (EditSafetensorsEntry), for readers'
// tests of headers that lie.
package testfs

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// Names lists the names of dir's entries, in directory order (sorted by
// name, as os.ReadDir returns them), failing t when dir cannot be read.
func Names(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
