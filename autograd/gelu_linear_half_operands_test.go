package autograd_test

import (
	"testing"

	"github.com/strata-ml/strata/autograd"
)

// TestGeluLinearHalfOperands: outside autocast GeluLinear and
// GeluLinearKept take bfloat16 and float16 u, w and b as they are (the
// GELU of u rounded to its dtype, half products) and differentiate them,
// whichever need gradients: each gradient, in its operand's dtype, is
// the float32 op's on the same values within half-precision rounding.
// With u's gradient wanted, backward failed with tensor.GeluBackward's
// "bfloat16 operand [6 4]: arithmetic runs in float32 and float64": the
// half product of the output gradient and w was taken as the GELU
// gradient's incoming one as it was.
func TestGeluLinearHalfOperands(t *testing.T) {
	layersMatchFloat32(t, 91, 3e-2, layerOp{"GeluLinear", autograd.GeluLinear}, layerOp{"GeluLinearKept", autograd.GeluLinearKept})
}
