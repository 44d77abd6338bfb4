package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// Every bad flag is refused before any row runs, naming the flag, with
// exit status 2 (-h: 0), as train-gpt does: a shape or an iteration count
// of 0 would print rows of nothing (or empty lines: NaN times), a dropout
// out of [0, 1) or a bad precision later in the list would fail after the
// rows before it ran.
func TestFlags(t *testing.T) {
	base := "-device cpu -B 1 -H 1 -T 8 -hd 4 -iters 1 -precision fp32 "
	for _, c := range []struct{ args, want string }{
		{"-iters 0", "-iters"},
		{"-iters -1", "-iters"},
		{"-B 0", "-B"},
		{"-B -1", "-B"},
		{"-H 0", "-H"},
		{"-T 0", "-T"},
		{"-hd 0", "-hd"},
		{"-dropout 1", "-dropout"},
		{"-dropout -0.5", "-dropout"},
		{"-dropout NaN", "-dropout"},
		{"-precision fp32,", "-precision"},
		{"-precision fp32,fp8", "-precision"},
		{"-device tpu", "-device"},
		{"extra", "unexpected arguments"},
		{"-bogus", "-bogus"},
	} {
		err := run(strings.Fields(base + c.args))
		require.Error(t, err, c.args)
		assert.Contains(t, err.Error(), c.want, c.args)
		assert.Equal(t, 2, cli.ExitCode(err), "%s: %v", c.args, err)
	}
	err := run([]string{"-h"})
	require.Error(t, err)
	assert.Equal(t, 0, cli.ExitCode(err))
	assert.Equal(t, 0, cli.ExitCode(nil))
}

// A small run on the CPU succeeds.
func TestTinyOnCPU(t *testing.T) {
	require.NoError(t, run(strings.Fields("-device cpu -B 1 -H 2 -T 8 -hd 4 -iters 1 -precision fp32")))
}
