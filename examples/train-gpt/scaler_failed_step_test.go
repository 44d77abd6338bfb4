package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// failingOpt is an optimizer whose Step fails (a device error, running
// out of memory in the update) before changing anything.
type failingOpt struct{ err error }

func (o failingOpt) Step() error { return o.err }
func (failingOpt) SetLR(float64) {}
func (failingOpt) Release()      {}

// TestScalerForgetsAStepWhoseUpdateFails: step's doc says a step that
// fails "changes nothing before its optimizer update: ... the gradient
// scaler forgets it". A step whose optimizer update fails (after the
// scaler's check found the gradients finite) must not count as a good
// step toward GrowthInterval, nor grow the scale: PyTorch's loop calls
// scaler.update() after scaler.step(optimizer), so an exception in the
// update never reaches it. The scaler's Update ran before the optimizer,
// so the failed step grew the scale.
func TestScalerForgetsAStepWhoseUpdateFails(t *testing.T) {
	tr := faultTrainer(t, tensor.CPU(), "-precision", "fp16")
	require.True(t, tr.scaler.Enabled())
	tr.scaler.GrowthInterval = 2
	_, err := tr.step(0)
	require.NoError(t, err)
	require.Equal(t, "1", tr.scaler.Metadata()["amp.good_steps"], "one good step")
	before := tr.scaler.Metadata()
	w := weights(tr)

	boom := errors.New("update failed")
	tr.altOpt = failingOpt{boom}
	_, err = tr.step(1)
	require.ErrorIs(t, err, boom)
	require.Equal(t, w, weights(tr), "the failed step changed no weight")
	require.Equal(t, before, tr.scaler.Metadata(), "the failed step is forgotten by the scaler")

	tr.altOpt = nil
	_, err = tr.step(1)
	require.NoError(t, err)
	require.Equal(t, 131072.0, tr.scaler.Scale, "the second good step grows the scale")
}
