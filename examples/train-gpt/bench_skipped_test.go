package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
)

// TestBenchSkippedStepsTimed: -bench's skipped_steps counts the timed
// steps the fp16 gradient scaler skipped, as its other figures (tok_s,
// timed_spills) are the timed steps'; it counted the warm-up's too, so
// a run whose scale backed off during the warm-up said its timed steps
// had skipped. Here a scale that stays past float32's range skips every
// step: 3 warm-up steps, 2 timed.
func TestBenchSkippedStepsTimed(t *testing.T) {
	t.Cleanup(func() { newScaler = amp.ScalerFor; stdout = os.Stdout })
	newScaler = func(s amp.State) *amp.GradScaler {
		sc := amp.ScalerFor(s)
		sc.Scale, sc.BackoffFactor = math.MaxFloat32, 0.9999999
		return sc
	}
	var out bytes.Buffer
	stdout = &out
	o, err := parseFlags([]string{"-bench", "-precision", "fp16", "-steps", "2", "-bench-warmup", "3", "-batch", "2", "-device", "cpu"})
	require.NoError(t, err)
	require.NoError(t, run(o))
	var r benchResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &r), out.String())
	require.Equal(t, 2, r.Steps)
	require.Equal(t, 2, r.Skipped, "the timed steps skipped, not the warm-up's 3 too")
}
