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

// layerOp is a layer of three operands (input, weight (5, 4), bias (5))
// by name.
type layerOp struct {
	name string
	f    func(x, w, b *autograd.Var) *autograd.Var
}

// layersMatchFloat32 runs halfOperandsMatchFloat32 on each op over an
// input (1, 2, 3, 4), a weight (5, 4) and a bias (5) drawn from seed, for
// every choice of operands needing gradients, within rel.
func layersMatchFloat32(t *testing.T, seed uint64, rel float64, ops ...layerOp) {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	tensor.WithScope(func() {
		x := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 3, 4)
		w := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 0.5, 5, 4)
		b := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, 5)
		for _, op := range ops {
			t.Run(op.name, func(t *testing.T) {
				eachRequired(t, 3, func(t *testing.T, req []bool) {
					halfOperandsMatchFloat32(t, []*tensor.Tensor{x, w, b}, req, rel, func(v []*autograd.Var) *autograd.Var {
						return op.f(v[0], v[1], v[2])
					})
				})
			})
		}
	})
}
