package autograd_test

// Misuse of the public API that once went wrong silently or with a runtime
// panic instead of an *OpError or error naming the problem.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestBadShapesAreOpErrors: a bad axis or a scalar where an op wants a
// last axis is an *tensor.OpError wrapping ErrShape, which tensor.Try
// returns, not a runtime panic (index out of range) that it passes on.
func TestBadShapesAreOpErrors(t *testing.T) {
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 3))
		s := autograd.Const(tensor.Scalar(tensor.CPU(), tensor.Float32, 1))
		w := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 1))
		for name, f := range map[string]func(){
			"Mean axis 2":    func() { autograd.Mean(x, false, 2) },
			"Mean axis -3":   func() { autograd.Mean(x, true, -3) },
			"Mean scalar -2": func() { autograd.Mean(s, true, -2) }, // 0 and -1 are a scalar's axis, as in PyTorch
			"Sum scalar 1":   func() { autograd.Sum(s, false, 1) },
			"Linear scalar":  func() { autograd.Linear(s, w, nil) },
		} {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(f) }, name)
			require.ErrorIs(t, err, tensor.ErrShape, name)
		}
	})
}
