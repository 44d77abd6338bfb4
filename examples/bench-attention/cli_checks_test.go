package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/tensor"
)

// TestPrecisionTwice: a precision named twice (-precision fp32,fp32) ran
// its rows twice; it is refused as memstrategies refuses a strategy
// twice.
func TestPrecisionTwice(t *testing.T) {
	err := run(strings.Fields("-device cpu -B 1 -H 1 -T 8 -hd 4 -iters 1 -precision fp32,fp32"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-precision: "fp32" twice`)
	assert.Equal(t, 2, cli.ExitCode(err))
}

// failWriter fails every write, as stdout on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestResultsWriteFailure: rows going to a stdout (or a table to a
// stderr) that fails are a failure of the run (status 1), naming it;
// they used to be lost with status 0.
func TestResultsWriteFailure(t *testing.T) {
	args := strings.Fields("-device cpu -B 1 -H 2 -T 8 -hd 4 -iters 1 -precision fp32")
	var out, table bytes.Buffer
	require.NoError(t, runTo(args, &out, &table))
	assert.Equal(t, 4, strings.Count(out.String(), "\n"), "a JSON line a row")
	err := runTo(args, failWriter{}, &table)
	require.ErrorContains(t, err, "writing the results to stdout: no space left on device")
	assert.Equal(t, 1, cli.ExitCode(err))
	err = runTo(args, &out, failWriter{})
	require.ErrorContains(t, err, "writing the table to stderr")
	assert.Equal(t, 1, cli.ExitCode(err))
}

// TestDeviceErrors: a device that cannot be used is a bad flag (status
// 2), decided before any row, saying what is wrong; it used to exit 1
// with tensor's "device mismatch or unavailable device".
func TestDeviceErrors(t *testing.T) {
	if _, err := tensor.ParseDevice("cuda"); err == nil {
		t.Skip("a GPU is usable here")
	}
	err := runTo(strings.Fields("-device cuda -B 1 -H 1 -T 8 -hd 4 -iters 1 -precision fp32"), failWriter{}, failWriter{})
	require.ErrorContains(t, err, "-device cuda: no usable GPU: ")
	assert.NotContains(t, err.Error(), "device mismatch")
	assert.Equal(t, 2, cli.ExitCode(err))
}

// TestDropoutErrorCompared: with -dropout the rows draw the same mask
// (autograd.FusedCausalAttention's promise), so the error against plain
// stays reported and small.
func TestDropoutErrorCompared(t *testing.T) {
	var out, table bytes.Buffer
	require.NoError(t, runTo(strings.Fields("-device cpu -B 1 -H 2 -T 8 -hd 4 -iters 1 -precision fp32 -dropout 0.5"), &out, &table))
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &r))
		require.Contains(t, r, "max_rel_err_vs_plain", r["attention"])
		assert.Less(t, r["max_rel_err_vs_plain"], 1e-5, r["attention"])
	}
}

// TestShapeTooLarge: a shape whose tensors would have more elements than
// memory can address is a bad flag (status 2) naming the flags, refused
// before any row; it used to be a failure of the run (status 1) with
// tensor's "shape [...] has too many elements: shape mismatch" or an
// out-of-memory error.
func TestShapeTooLarge(t *testing.T) {
	for _, args := range []string{
		"-T 9223372036854775807",
		"-B 3037000500 -H 3037000500",
		"-T 4294967296",
		"-H 2305843009213693952 -hd 2",
	} {
		var out bytes.Buffer
		err := runTo(strings.Fields("-device cpu -B 1 -H 1 -T 8 -hd 4 -iters 1 -precision fp32 "+args), &out, &out)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), "-B, -H, -T and -hd", args)
		assert.Equal(t, 2, cli.ExitCode(err), "%s: %v", args, err)
		assert.Empty(t, out.String(), args)
	}
}

// TestMaxErrNotFinite: a NaN in the outputs makes maxErr NaN, and the row
// is refused with an error that says so.
func TestMaxErrNotFinite(t *testing.T) {
	ref := [][]float64{{1, 2, 3}}
	require.NoError(t, finiteErr(maxErr([][]float64{{1, 2, 3.0001}}, ref)))
	e := maxErr([][]float64{{1, math.NaN(), 3}}, ref)
	require.True(t, math.IsNaN(e))
	require.ErrorContains(t, finiteErr(e), "not finite")
	require.ErrorContains(t, finiteErr(math.Inf(1)), "not finite")
}
