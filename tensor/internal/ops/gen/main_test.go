package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor/internal/ops"
)

// TestGeneratedFilesAreCurrent fails when kernels/ops_gen.cuh or
// tensor/ops_gen.go differs from what the table gives now (run go
// generate ./tensor/internal/ops), and checks the CUDA enums code by code.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("the repository is not around the test binary: %v", err)
	}
	files, err := generate()
	require.NoError(t, err)
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s is stale: run go generate ./tensor/internal/ops", path)
	}

	// Every code, from the header as committed: one enumerator per op with
	// its code, and the counts.
	h, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(cudaHeaderPath)))
	require.NoError(t, err)
	enum := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z_]+) = (\d+)`).FindAllSubmatch(h, -1) {
		var v int
		_, err := fmt.Sscan(string(m[2]), &v)
		require.NoError(t, err)
		require.NotContains(t, enum, string(m[1]), "enumerator %s twice", m[1])
		enum[string(m[1])] = v
	}
	for op := range ops.NumUnary {
		require.Contains(t, enum, unaryEnum(op), "the CUDA enum lacks %v", op)
		require.Equal(t, int(op), enum[unaryEnum(op)], "%s", unaryEnum(op))
	}
	for op := range ops.NumBinary {
		require.Contains(t, enum, binaryEnum(op), "the CUDA enum lacks %v", op)
		require.Equal(t, int(op), enum[binaryEnum(op)], "%s", binaryEnum(op))
	}
	require.Equal(t, int(ops.NumUnary), enum["NUM_UNARY"])
	require.Equal(t, int(ops.NumBinary), enum["NUM_BINARY"])
	require.Len(t, enum, int(ops.NumUnary+1)+int(ops.NumBinary+1), "the header has enumerators outside the table")

	// The kernels switch on the enumerators, not on numbers: each unary op
	// has a forward and a backward case, each binary op a case.
	ew, err := os.ReadFile(filepath.Join(root, "kernels", "elementwise.cuh"))
	require.NoError(t, err)
	for op := range ops.NumUnary {
		assert.Equal(t, 2, strings.Count(string(ew), "case "+unaryEnum(op)+":"), "kernels/elementwise.cuh: %s needs a case in unary_fn and in unary_grad", unaryEnum(op))
	}
	for op := range ops.NumBinary {
		assert.Equal(t, 1, strings.Count(string(ew), "case "+binaryEnum(op)+":"), "kernels/elementwise.cuh: %s needs a case in binary_fn", binaryEnum(op))
	}
}
