package autograd_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Only a floating-point leaf can require gradients, as Param's doc says
// and as in PyTorch: SetRequiresGrad(true) on an int32 Const was accepted,
// and the mistake surfaced only in a later Backward ("backward of Cast
// gave a gradient of dtype int32"). It is refused where it is made, with
// an *tensor.OpError (so tensor.Try returns it), as is SetRequiresGrad on
// a non-leaf (once a plain string panic).
func TestSetRequiresGradRefusesIntegerLeaves(t *testing.T) {
	dev := tensor.CPU()
	s := tensor.NewScope()
	defer s.Close()
	ids := autograd.Const(tensor.FromInt32s(dev, []int32{1, 2}, 2))
	err := tensor.Try(func() { ids.SetRequiresGrad(true) })
	require.Error(t, err)
	assert.True(t, errors.Is(err, tensor.ErrDType), "%v", err)
	assert.Contains(t, err.Error(), "autograd.Var.SetRequiresGrad")
	assert.Contains(t, err.Error(), "int32")
	assert.False(t, ids.RequiresGrad())
	ids.SetRequiresGrad(false) // turning it off is always fine

	w := autograd.Param(tensor.FromFloat32s(dev, []float32{1, 2}, 2), "w")
	defer w.Value.Release()
	w.SetRequiresGrad(false) // freeze
	assert.False(t, w.RequiresGrad())
	w.SetRequiresGrad(true)
	y := autograd.Mul(w, w)
	err = tensor.Try(func() { y.SetRequiresGrad(false) })
	require.Error(t, err)
	assert.True(t, errors.Is(err, tensor.ErrArgument), "%v", err)
	assert.Contains(t, err.Error(), "non-leaf")
	require.NoError(t, autograd.Sum(y, false).Backward())
	defer w.ZeroGrad()
	assert.Equal(t, []float32{2, 4}, w.Grad.Float32s())
}

// CrossEntropy with extreme logits and ignored targets against
// PyTorch 1.13 (F.cross_entropy, mean): a -Inf logit of a class that is
// not the target, a 1e30 logit, and a batch whose targets are all
// ignored, which strata's doc makes 0 where PyTorch's mean is NaN.
func TestCrossEntropyExtremeLogitsAgainstPyTorch(t *testing.T) {
	dev := tensor.CPU()
	s := tensor.NewScope()
	defer s.Close()
	ninf := float32(tensor.NegInf)
	x := autograd.Param(tensor.FromFloat32s(dev, []float32{ninf, 0, 0, 1e30, -1e30, 0}, 2, 3), "x")
	defer x.Value.Release()
	defer x.ZeroGrad()
	l := autograd.CrossEntropy(x, tensor.FromInt32s(dev, []int32{1, 1}, 2))
	// torch: 1.0000000150474662e+30, grad [[0, -0.25, 0.25], [0.5, -0.5, 0]]
	assert.InEpsilon(t, 1e30, l.Item(), 1e-6)
	require.NoError(t, l.Backward())
	assert.Equal(t, []float32{0, -0.25, 0.25, 0.5, -0.5, 0}, x.Grad.Float32s())

	y := autograd.Param(tensor.FromFloat32s(dev, []float32{1, 2, 3, 4, 5, 6}, 2, 3), "y")
	defer y.Value.Release()
	defer y.ZeroGrad()
	l = autograd.CrossEntropy(y, tensor.FromInt32s(dev, []int32{autograd.IgnoreIndex, autograd.IgnoreIndex}, 2))
	assert.Equal(t, 0.0, l.Item()) // torch: nan (documented difference)
	require.NoError(t, l.Backward())
	assert.Equal(t, []float32{0, 0, 0, 0, 0, 0}, y.Grad.Float32s()) // torch: zeros too
}
