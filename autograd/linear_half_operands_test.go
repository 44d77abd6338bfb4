package autograd_test

import (
	"testing"

	"github.com/strata-ml/strata/autograd"
)

// TestLinearHalfOperands: outside autocast Linear (and LinearHalf, which
// is Linear there) takes bfloat16 and float16 x, w and b as they are and
// differentiates them, whichever need gradients: each gradient, in its
// operand's dtype, is the float32 layer's on the same values within
// half-precision rounding. With only the bias's gradient wanted (of the
// weight and bias), backward failed with tensor.Sum's "bfloat16 operand
// [6 5]: arithmetic runs in float32 and float64": the half output
// gradient was summed as it came.
func TestLinearHalfOperands(t *testing.T) {
	layersMatchFloat32(t, 81, 2e-2, layerOp{"Linear", autograd.Linear}, layerOp{"LinearHalf", autograd.LinearHalf})
}
