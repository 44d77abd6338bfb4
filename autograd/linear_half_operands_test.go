package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
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
	rng := rand.New(rand.NewPCG(81, 82))
	tensor.WithScope(func() {
		x := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3, 4)
		w := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 0.5, 5, 4)
		b := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 5)
		for _, op := range []struct {
			name string
			f    func(x, w, b *autograd.Var) *autograd.Var
		}{{"Linear", autograd.Linear}, {"LinearHalf", autograd.LinearHalf}} {
			t.Run(op.name, func(t *testing.T) {
				eachRequired(t, 3, func(t *testing.T, req []bool) {
					halfOperandsMatchFloat32(t, []*tensor.Tensor{x, w, b}, req, 2e-2, func(v []*autograd.Var) *autograd.Var {
						return op.f(v[0], v[1], v[2])
					})
				})
			})
		}
	})
}
