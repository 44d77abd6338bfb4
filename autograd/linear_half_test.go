package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// LinearHalf under autocast returns the product in the half type: Linear's
// float32 result up to one rounding of the output (and of the bias, added
// in the half type as PyTorch's autocast adds it); its gradients are
// Linear's up to that rounding reaching them. Outside autocast it is
// Linear, bit for bit. An MLP whose hidden product is half gives the
// float32 one's results up to that rounding. On the CPU and on CUDA.
func TestLinearHalf(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testLinearHalf(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { testLinearHalf(t, attnGPU(t)) })
}

func testLinearHalf(t *testing.T, dev tensor.Device) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		rng := rand.New(rand.NewPCG(31, 32))
		x := c.RandN(dev, tensor.Float32, rng, 1, 3, 17, 24)
		w, b := c.RandN(dev, tensor.Float32, rng, 0.2, 40, 24), c.RandN(dev, tensor.Float32, rng, 1, 40)
		r := c.RandN(dev, tensor.Float32, rng, 1, 3, 17, 40)
		in := []*tensor.Tensor{x, w, b}
		lin := func(half bool) func(x []*autograd.Var) *autograd.Var {
			return func(x []*autograd.Var) *autograd.Var {
				if !half {
					return autograd.Linear(x[0], x[1], x[2])
				}
				y := autograd.LinearHalf(x[0], x[1], x[2])
				if amp.Current(x[0].Value.Ctx()).Enabled {
					require.Equal(t, amp.Current(x[0].Value.Ctx()).DType, y.Value.DType())
				}
				return autograd.Cast(y, tensor.Float32) // float32 for runOp
			}
		}
		y0, g0 := runOp(t, c, lin(false), in, r, nil)
		y1, g1 := runOp(t, c, lin(true), in, r, nil)
		require.Equal(t, y0, y1, "float32: Linear's bits")
		require.Equal(t, g0, g1, "float32: Linear's gradients")
		// An MLP whose hidden product is half (the GELU reads it widened).
		w2, b2 := c.RandN(dev, tensor.Float32, rng, 0.2, 40, 40), c.RandN(dev, tensor.Float32, rng, 1, 40)
		mlp := func(half bool) func(x []*autograd.Var) *autograd.Var {
			return func(x []*autograd.Var) *autograd.Var {
				u := autograd.Linear(x[0], x[1], x[2])
				if half {
					u = autograd.LinearHalf(x[0], x[1], x[2])
				}
				return autograd.GeluLinear(u, x[3], x[4])
			}
		}
		for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
			u := 0x1p-8
			if dt == tensor.Float16 {
				u = 0x1p-11
			}
			y0, g0 = runOp(t, c, lin(false), in, r, &dt)
			y1, g1 = runOp(t, c, lin(true), in, r, &dt)
			require.Less(t, relErr(y0, y1), 2*u, "%v output", dt)
			for i := range g0 {
				require.Less(t, relErr(g0[i], g1[i]), 4*u, "%v gradient %d", dt, i)
			}
			y0, g0 = runOp(t, c, mlp(false), append(in, w2, b2), r, &dt)
			y1, g1 = runOp(t, c, mlp(true), append(in, w2, b2), r, &dt)
			require.Less(t, relErr(y0, y1), 4*u, "%v MLP output", dt)
			for i := range g0 {
				require.Less(t, relErr(g0[i], g1[i]), 8*u, "%v MLP gradient %d", dt, i)
			}
		}
	})
	require.Zero(t, c.BytesInUse())
}
