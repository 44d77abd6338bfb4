package main

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
)

// TestRunsBounded: -runs had no upper bound, so a typo (-runs 10000000)
// generated for days. Above maxRuns it is a bad flag naming the bound;
// maxRuns itself is taken.
func TestRunsBounded(t *testing.T) {
	_, w := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	for _, n := range []string{"1001", "10000000", "9223372036854775807"} {
		_, err := parseFlags([]string{"-weights", w, "-runs", n}, io.Discard)
		var u cli.UsageError
		require.True(t, errors.As(err, &u), "%s: %v", n, err)
		require.ErrorContains(t, err, "-runs "+n+": want 1 to 1000", n)
		require.Equal(t, 2, cli.ExitCode(err))
	}
	o, err := parseFlags([]string{"-weights", w, "-runs", "1000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1000, o.runs)
}
