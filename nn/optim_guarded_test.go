package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestAdamWGuardedSameBits: the guarded clip and update (what a CUDA graph
// captures) give the losses and weights of ClipGradNorm and Step bit for
// bit, with the gradients clipped every step and not at all.
func TestAdamWGuardedSameBits(t *testing.T) {
	check := func(t *testing.T, dev tensor.Device, prec amp.State) {
		for _, maxNorm := range []float64{0.05, math.Inf(1)} {
			l0, w0 := trainAdamW(t, dev, prec, trainRun{maxNorm: maxNorm})
			l1, w1 := trainAdamW(t, dev, prec, trainRun{maxNorm: maxNorm, guarded: true})
			require.Equal(t, l0, l1, "losses, max norm %v", maxNorm)
			require.Equal(t, w0, w1, "weights, max norm %v", maxNorm)
		}
	}
	onCPUAndCUDA(t, check)
}

// A guarded update with unset constants says so; a skipped step is not
// counted.
func TestAdamWGuardedErrors(t *testing.T) {
	p, opt, args := guardedOne(t, tensor.CPU())
	require.ErrorContains(t, opt.StepGuarded(args, nil), "Set")
	require.NoError(t, opt.PrepareGuarded(args))
	require.NoError(t, opt.StepGuarded(args, nil))
	require.Less(t, p.Value.Float32s()[0], float32(1), "updated")
	require.Equal(t, 0, opt.Steps())
	opt.CommitGuarded(true)
	require.Equal(t, 0, opt.Steps(), "a skipped step is not counted")
	opt.CommitGuarded(false)
	require.Equal(t, 1, opt.Steps())
}

// On a GPU, StepGuarded inside a capture refuses to make the moments
// (the capture would zero them at every replay).
func TestGPUAdamWGuardedNeedsMoments(t *testing.T) {
	dev := cudaOrSkip(t)
	_, opt, args := guardedOne(t, dev)
	var stepErr error
	g, err := tensor.CaptureGraph(dev, func() { stepErr = opt.StepGuarded(args, nil) })
	require.NoError(t, err)
	require.NoError(t, g.Release())
	require.ErrorContains(t, stepErr, "take one step before capturing")
}

// guardedOne is a parameter of three ones with a gradient of ones, its
// AdamW and the update's constants on dev, released when the test ends.
func guardedOne(t *testing.T, dev tensor.Device) (*nn.Parameter, *nn.AdamW, *tensor.AdamWArgs) {
	p := &nn.Parameter{Var: autogradParam(tensor.Ones(dev, tensor.Float32, 3)), Name: "w"}
	p.Grad = tensor.Ones(dev, tensor.Float32, 3)
	opt := nn.NewAdamW([]*nn.Parameter{p}, 1e-3, 0)
	args, err := tensor.NewAdamWArgs(dev)
	require.NoError(t, err)
	t.Cleanup(func() {
		args.Release()
		opt.Release()
		nn.Release([]*nn.Parameter{p})
	})
	return p, opt, args
}

// TestGuardedRefusesNilGuardAndArgs: ClipGradNormGuarded without a
// StepGuard, and PrepareGuarded without the AdamWArgs to write, crashed
// the program with a nil-pointer panic (tensor.Try passes on what is not
// an *OpError); each is an error wrapping tensor.ErrArgument, the
// gradients and the optimizer as they were.
func TestGuardedRefusesNilGuardAndArgs(t *testing.T) {
	p, opt, _ := guardedOne(t, tensor.CPU())
	p.Grad.Fill(10)
	var err error
	require.NotPanics(t, func() { err = nn.ClipGradNormGuarded(opt.Params, nil, 1, nil) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "nil StepGuard")
	require.Equal(t, []float32{10, 10, 10}, p.Grad.Float32s())
	require.NotPanics(t, func() { err = opt.PrepareGuarded(nil) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "nil AdamWArgs")
}
