package autograd_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestMatMulHalfOperands: outside autocast MatMul takes bfloat16 and
// float16 operands as they are (a half product) and differentiates them,
// whichever need gradients, also where an operand was broadcast along
// batch axes: each gradient, in its operand's dtype, is the float32
// product's on the same values within half-precision rounding. A
// broadcast operand's gradient failed with tensor.SumTo's "bfloat16
// operand [2 4 5]: arithmetic runs in float32 and float64": the half
// products were summed over the batch as they were.
func TestMatMulHalfOperands(t *testing.T) {
	rng := rand.New(rand.NewPCG(101, 102))
	tensor.WithScope(func() {
		for _, shapes := range [][2][]int{
			{{2, 3, 4}, {1, 4, 5}},    // b broadcast
			{{1, 3, 4}, {2, 4, 5}},    // a broadcast
			{{2, 1, 3, 4}, {3, 4, 5}}, // both, over different axes
			{{2, 3, 4}, {4, 5}},       // a shared matrix (one GEMM)
			{{3, 4}, {4, 5}},
		} {
			a := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, shapes[0]...)
			b := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, shapes[1]...)
			t.Run(fmtShapes(shapes), func(t *testing.T) {
				eachRequired(t, 2, func(t *testing.T, req []bool) {
					halfOperandsMatchFloat32(t, []*tensor.Tensor{a, b}, req, 2e-2, func(v []*autograd.Var) *autograd.Var {
						return autograd.MatMul(v[0], v[1])
					})
				})
			})
		}
	})
}

// fmtShapes names a product's operand shapes ("[2 3 4]@[1 4 5]").
func fmtShapes(s [2][]int) string {
	return fmt.Sprintf("%v@%v", s[0], s[1])
}
