package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// halfOperandsMatchFloat32 checks that op, run outside autocast on
// leaves of each half dtype (bfloat16 and float16) holding vals, the
// leaves req marks requiring gradients, differentiates: each gradient
// is in its leaf's dtype and within half-precision rounding (rel of the
// largest, relative to the largest float32 one) of the gradient of op
// on float32 leaves holding the same half-rounded values. The loss is
// the sum of op's output, taken to float32, weighted by random values.
func halfOperandsMatchFloat32(t *testing.T, vals []*tensor.Tensor, req []bool, rel float64, op func(x []*autograd.Var) *autograd.Var) {
	t.Helper()
	tensor.WithScope(func() {
		grads := func(dt tensor.DType, vals []*tensor.Tensor, seed uint64) [][]float64 {
			xs := make([]*autograd.Var, len(vals))
			for i, v := range vals {
				xs[i] = leaf(v.To(dt), req[i])
			}
			y := autograd.Cast(op(xs), tensor.Float32)
			r := tensor.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(seed, 1)), 1, y.Value.Shape()...)
			loss := autograd.Sum(autograd.Mul(y, autograd.Const(r)), false)
			require.NoError(t, loss.Backward(), "%v", dt)
			gs := make([][]float64, len(xs))
			for i, x := range xs {
				if req[i] {
					require.Equal(t, dt, x.Grad.DType(), "%v: gradient %d", dt, i)
					gs[i] = x.Grad.Float64s()
					done(x)
				}
			}
			return gs
		}
		for s, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
			rounded := make([]*tensor.Tensor, len(vals))
			for i, v := range vals {
				rounded[i] = v.To(dt).To(tensor.Float32) // the half values in float32
			}
			want := grads(tensor.Float32, rounded, uint64(s))
			got := grads(dt, vals, uint64(s))
			for i := range want {
				scale := 0.0
				for _, w := range want[i] {
					scale = max(scale, math.Abs(w))
				}
				require.InDeltaSlice(t, want[i], got[i], rel*scale+1e-6, "%v: gradient %d", dt, i)
			}
		}
	})
}

// eachRequired runs f for every non-empty choice of n operands that
// require gradients.
func eachRequired(t *testing.T, n int, f func(t *testing.T, req []bool)) {
	for mask := 1; mask < 1<<n; mask++ {
		req := make([]bool, n)
		for i := range req {
			req[i] = mask&(1<<i) != 0
		}
		t.Run(fmtReq(req), func(t *testing.T) { f(t, req) })
	}
}

// fmtReq names a choice of operands requiring gradients ("x-b" for the
// first and third of three).
func fmtReq(req []bool) string {
	s := ""
	for i, r := range req {
		c := "-"
		if r {
			c = string(rune('a' + i))
		}
		s += c
	}
	return s
}
