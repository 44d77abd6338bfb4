package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// runOp evaluates f on float32 copies of xs in c, optionally inside an
// autocast region, and returns the output and the gradients of
// sum(f(xs) · r).
func runOp(t *testing.T, c *tensor.Ctx, f func([]*autograd.Var) *autograd.Var, xs []*tensor.Tensor, r *tensor.Tensor, dt *tensor.DType) (y []float64, grads [][]float64) {
	vars := make([]*autograd.Var, len(xs))
	for i, x := range xs {
		// Leaves in c (not kept Params): an op takes its autocast state
		// from its operands' context.
		vars[i] = autograd.Const(c.Adopt(x.Clone()))
		vars[i].SetRequiresGrad(true)
	}
	var loss *autograd.Var
	body := func() {
		out := f(vars)
		require.Equal(t, tensor.Float32, out.Value.DType())
		y = out.Value.Float64s()
		loss = autograd.Sum(autograd.Mul(out, autograd.Const(r)), false)
	}
	if dt != nil {
		amp.Autocast(c, *dt, body)
	} else {
		body()
	}
	require.NoError(t, loss.Backward())
	for _, v := range vars {
		require.Equal(t, tensor.Float32, v.Grad.DType())
		grads = append(grads, v.Grad.Float64s())
		v.ZeroGrad()
		v.Value.Release()
	}
	return y, grads
}

func maxRel(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num = max(num, math.Abs(a[i]-b[i]))
		den = max(den, math.Abs(b[i]))
	}
	return num / den
}

// TestAutocastProducts: inside an autocast region a matrix product and
// its backward products multiply operands rounded to the region's dtype
// with float32 accumulation. With r exact in that dtype (so the output
// gradient needs no rounding), MatMul and Linear under autocast equal the
// float32 ops on rounded inputs up to the order of float32 additions; the
// plain float32 ops on unrounded inputs differ by about the unit
// roundoff. The attention and GeluLinear also round intermediate values
// (the probabilities, the GELU output) before their products, so they are
// checked to differ from float32 by a few roundoffs, no more.
func TestAutocastProducts(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	randn := func(c *tensor.Ctx, shape ...int) *tensor.Tensor {
		return c.RandN(tensor.CPU(), tensor.Float32, rng, 1, shape...)
	}
	cases := []struct {
		name  string
		exact bool
		in    [][]int
		out   []int
		f     func([]*autograd.Var) *autograd.Var
	}{
		{"MatMul", true, [][]int{{2, 5, 33}, {2, 33, 4}}, []int{2, 5, 4}, func(x []*autograd.Var) *autograd.Var { return autograd.MatMul(x[0], x[1]) }},
		{"MatMul/shared", true, [][]int{{2, 5, 33}, {33, 4}}, []int{2, 5, 4}, func(x []*autograd.Var) *autograd.Var { return autograd.MatMul(x[0], x[1]) }},
		{"Linear", true, [][]int{{3, 4, 40}, {6, 40}, {6}}, []int{3, 4, 6}, func(x []*autograd.Var) *autograd.Var { return autograd.Linear(x[0], x[1], x[2]) }},
		{"GeluLinear", false, [][]int{{3, 4, 40}, {6, 40}, {6}}, []int{3, 4, 6}, func(x []*autograd.Var) *autograd.Var { return autograd.GeluLinear(x[0], x[1], x[2]) }},
		{"CausalAttention", false, [][]int{{2, 2, 9, 16}, {2, 2, 9, 16}, {2, 2, 9, 16}}, []int{2, 2, 9, 16}, func(x []*autograd.Var) *autograd.Var {
			return autograd.CausalAttention(x[0], x[1], x[2], 0, 0, 0)
		}},
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		u := 1.0 / 256
		if dt == tensor.Float16 {
			u = 1.0 / 2048
		}
		for _, tc := range cases {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				c := tensor.NewCtx()
				c.WithScope(func() {
					var xs, rounded []*tensor.Tensor
					for i, s := range tc.in {
						x := randn(c, s...)
						xs = append(xs, x)
						if i == 2 && tc.name == "Linear" { // the bias is added in float32
							rounded = append(rounded, x)
							continue
						}
						rounded = append(rounded, x.To(dt).To(tensor.Float32))
					}
					r := randn(c, tc.out...).To(dt).To(tensor.Float32)
					ampY, ampG := runOp(t, c, tc.f, xs, r, &dt)
					fY, fG := runOp(t, c, tc.f, xs, r, nil)
					rY, rG := runOp(t, c, tc.f, rounded, r, nil)
					if tc.exact {
						require.Less(t, maxRel(ampY, rY), 1e-5, "output against float32 on rounded operands")
						for i := range ampG {
							if i == 2 { // a bias gradient sums g: no product
								require.Less(t, maxRel(ampG[i], fG[i]), 1e-6, "bias gradient")
								continue
							}
							require.Less(t, maxRel(ampG[i], rG[i]), 1e-5, "gradient %d against float32 on rounded operands", i)
						}
					}
					d := maxRel(ampY, fY)
					require.Greater(t, d, u/64, "the products were rounded to %v", dt)
					require.Less(t, d, 8*u, "output within a few roundoffs of float32")
					for i := range ampG {
						require.Less(t, maxRel(ampG[i], fG[i]), 16*u, "gradient %d within a few roundoffs of float32", i)
					}
				})
				require.Zero(t, c.BytesInUse())
			})
		}
	}
}
