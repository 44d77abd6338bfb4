package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestGraphStepNotFiniteIsNotAGoodStep: a replayed step whose loss or
// gradient norm is not finite, without an fp16 overflow, stops the run
// as the eager step does, and the gradient scaler forgets it (the eager
// step's AbortStep): it is not counted as a good step toward
// GrowthInterval, nor does the optimizer count it. An overflow is the
// scaler's skipped step; a finite one is a good step.
func TestGraphStepNotFiniteIsNotAGoodStep(t *testing.T) {
	tr := faultTrainer(t, tensor.CPU(), "-precision", "fp16", "-max-skips", "3")
	require.True(t, tr.scaler.Enabled())
	tr.scaler.GrowthInterval = 2

	require.NoError(t, tr.graphResult(tensor.StepResult{Loss: 3, Norm: 1, Clip: 1}))
	require.Equal(t, "1", tr.scaler.Metadata()["amp.good_steps"], "a finite step is a good one")
	require.Equal(t, 1, tr.opt.Steps())
	before := tr.scaler.Metadata()

	for _, r := range []tensor.StepResult{
		{Loss: math.NaN(), Norm: 1, Clip: 1, Skipped: true},
		{Loss: 3, Norm: math.Inf(1), Clip: 1, Skipped: true},
	} {
		err := tr.graphResult(r)
		require.ErrorContains(t, err, "not finite")
		require.Equal(t, before, tr.scaler.Metadata(), "the stopped step is forgotten by the scaler")
		require.Equal(t, 1, tr.opt.Steps(), "the stopped step did not update")
		require.Equal(t, 65536.0, tr.scaler.Scale)
	}

	require.NoError(t, tr.graphResult(tensor.StepResult{Loss: 3, Skipped: true, Overflow: true}))
	require.Equal(t, 32768.0, tr.scaler.Scale, "an overflow backs the scale off")
	require.Equal(t, "1", tr.scaler.Metadata()["amp.skipped"])
	require.Equal(t, 1, tr.skips)
	require.Equal(t, 1, tr.opt.Steps())
}
