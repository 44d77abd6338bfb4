package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
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
	rng := rand.New(rand.NewPCG(91, 92))
	tensor.WithScope(func() {
		u := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3, 4)
		w := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 0.5, 5, 4)
		b := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 5)
		for _, op := range []struct {
			name string
			f    func(u, w, b *autograd.Var) *autograd.Var
		}{{"GeluLinear", autograd.GeluLinear}, {"GeluLinearKept", autograd.GeluLinearKept}} {
			t.Run(op.name, func(t *testing.T) {
				eachRequired(t, 3, func(t *testing.T, req []bool) {
					halfOperandsMatchFloat32(t, []*tensor.Tensor{u, w, b}, req, 3e-2, func(v []*autograd.Var) *autograd.Var {
						return op.f(v[0], v[1], v[2])
					})
				})
			})
		}
	})
}
