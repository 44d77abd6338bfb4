package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Under autocast, GeluLinear's GELU gradient and the in-place attention's
// q/k/v gradient reach the Linear below them in the half type (the engine's
// half gradients): the same bits as when they go through an op between
// (an identity Reshape, which takes no half gradient, so they are widened
// to float32 and cast back by the Linear's products), on the CPU and on
// CUDA. LayerNormHalf gives LayerNorm's bits to the products after it.
func TestHalfGradientsGiveTheWidenedPathsBits(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testHalfGradChains(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { testHalfGradChains(t, attnGPU(t)) })
}

func testHalfGradChains(t *testing.T, dev tensor.Device) {
	const B, T, C, H = 2, 33, 32, 2
	between := func(v *autograd.Var, identity bool) *autograd.Var {
		if identity {
			return autograd.Reshape(v, v.Value.Shape()...)
		}
		return v
	}
	mlp := func(identity bool) func(x []*autograd.Var) *autograd.Var {
		return func(x []*autograd.Var) *autograd.Var {
			u := between(autograd.Linear(x[0], x[1], x[2]), identity)
			return autograd.GeluLinear(u, x[3], x[4])
		}
	}
	attn := func(identity bool) func(x []*autograd.Var) *autograd.Var {
		return func(x []*autograd.Var) *autograd.Var {
			qkv := between(autograd.Linear(x[0], x[1], x[2]), identity)
			return autograd.FusedCausalAttentionQKV(qkv, H, 0.1, attnSeed, attnOffset)
		}
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(21, 22))
			x := c.RandN(dev, tensor.Float32, rng, 1, B, T, C)
			w1, b1 := c.RandN(dev, tensor.Float32, rng, 0.2, 4*C, C), c.RandN(dev, tensor.Float32, rng, 0.1, 4*C)
			w2, b2 := c.RandN(dev, tensor.Float32, rng, 0.2, C, 4*C), c.RandN(dev, tensor.Float32, rng, 0.1, C)
			r := c.RandN(dev, tensor.Float32, rng, 1, B, T, C)
			in := []*tensor.Tensor{x, w1, b1, w2, b2}
			y0, g0 := runOp(t, c, mlp(true), in, r, &dt)
			y1, g1 := runOp(t, c, mlp(false), in, r, &dt)
			require.Equal(t, y0, y1, "%v: MLP output", dt)
			require.Equal(t, g0, g1, "%v: MLP gradients", dt)

			// LayerNormHalf into one product, and into two whose gradients
			// are summed (in float32, as the float32 output's would be).
			lw, lb := c.RandN(dev, tensor.Float32, rng, 1, C), c.RandN(dev, tensor.Float32, rng, 1, C)
			wl, bl := c.RandN(dev, tensor.Float32, rng, 0.2, C, C), c.RandN(dev, tensor.Float32, rng, 0.1, C)
			norm := func(half, twice bool) func(x []*autograd.Var) *autograd.Var {
				return func(x []*autograd.Var) *autograd.Var {
					h := autograd.LayerNorm(x[0], x[3], x[4], 1e-5)
					if half {
						h = autograd.LayerNormHalf(x[0], x[3], x[4], 1e-5)
						require.Equal(t, dt, h.Value.DType())
					}
					y := autograd.Linear(h, x[1], x[2])
					if twice {
						y = autograd.Add(y, autograd.Linear(h, x[1], nil))
					}
					return y
				}
			}
			for _, twice := range []bool{false, true} {
				in = []*tensor.Tensor{x, wl, bl, lw, lb}
				y0, g0 = runOp(t, c, norm(false, twice), in, r, &dt)
				y1, g1 = runOp(t, c, norm(true, twice), in, r, &dt)
				require.Equal(t, y0, y1, "%v: LayerNormHalf output (twice %v)", dt, twice)
				require.Equal(t, g0, g1, "%v: LayerNormHalf gradients (twice %v)", dt, twice)
			}

			wq, bq := c.RandN(dev, tensor.Float32, rng, 0.2, 3*C, C), c.RandN(dev, tensor.Float32, rng, 0.1, 3*C)
			in = []*tensor.Tensor{x, wq, bq}
			y0, g0 = runOp(t, c, attn(true), in, r, &dt)
			y1, g1 = runOp(t, c, attn(false), in, r, &dt)
			require.Equal(t, y0, y1, "%v: attention output", dt)
			require.Equal(t, g0, g1, "%v: attention gradients", dt)
		})
		require.Zero(t, c.BytesInUse())
	}
}
