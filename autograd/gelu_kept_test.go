package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// GeluLinearKept keeps the GELU output that GeluLinear recomputes: the
// same output and gradients, bit for bit, in float32 and under bf16 and
// fp16 autocast (with the hidden product half, as nn's MLP makes it), on
// the CPU and on CUDA. Without gradients the kept output is released at
// once: the op holds no more memory than GeluLinear after the forward.
func TestGeluLinearKept(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testGeluLinearKept(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { testGeluLinearKept(t, attnGPU(t)) })
}

func testGeluLinearKept(t *testing.T, dev tensor.Device) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		rng := rand.New(rand.NewPCG(41, 42))
		x := c.RandN(dev, tensor.Float32, rng, 1, 3, 17, 24)
		w1, b1 := c.RandN(dev, tensor.Float32, rng, 0.2, 40, 24), c.RandN(dev, tensor.Float32, rng, 1, 40)
		w2, b2 := c.RandN(dev, tensor.Float32, rng, 0.2, 24, 40), c.RandN(dev, tensor.Float32, rng, 1, 24)
		r := c.RandN(dev, tensor.Float32, rng, 1, 3, 17, 24)
		in := []*tensor.Tensor{x, w1, b1, w2, b2}
		mlp := func(kept bool) func(x []*autograd.Var) *autograd.Var {
			return func(x []*autograd.Var) *autograd.Var {
				u := autograd.LinearHalf(x[0], x[1], x[2])
				if kept {
					return autograd.GeluLinearKept(u, x[3], x[4])
				}
				return autograd.GeluLinear(u, x[3], x[4])
			}
		}
		for _, dt := range []*tensor.DType{nil, ptr(tensor.BFloat16), ptr(tensor.Float16)} {
			y0, g0 := runOp(t, c, mlp(false), in, r, dt)
			y1, g1 := runOp(t, c, mlp(true), in, r, dt)
			require.Equal(t, y0, y1, "%v: GeluLinear's output", dt)
			require.Equal(t, g0, g1, "%v: GeluLinear's gradients", dt)
		}
		// Without gradients, nothing is kept past the op.
		inUse := func(kept bool) int64 {
			var n int64
			c.WithScope(func() {
				xs := make([]*autograd.Var, len(in))
				for i, v := range in {
					xs[i] = autograd.Const(v)
				}
				autograd.NoGradIn(c, func() { mlp(kept)(xs) })
				n = dev.Memory().Stats().Total.Requested.Current
			})
			return n
		}
		require.Equal(t, inUse(false), inUse(true), "bytes in use after the forward without gradients")
	})
}

// Under autocast a Linear (and GeluLinear) whose weight is a kept
// parameter saves the region's cast of it for backward instead of casting
// it again there: the same output and gradients as with a weight of the
// context (cast afresh each time), bit for bit, and once backward has run
// and the gradients are released, no byte more in use than before.
func TestSavedWeightCopy(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testSavedWeightCopy(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { testSavedWeightCopy(t, attnGPU(t)) })
}

func testSavedWeightCopy(t *testing.T, dev tensor.Device) {
	rng := rand.New(rand.NewPCG(43, 44))
	xv := tensor.RandN(dev, tensor.Float32, rng, 1, 5, 24)
	w1v, w2v := tensor.RandN(dev, tensor.Float32, rng, 0.2, 40, 24), tensor.RandN(dev, tensor.Float32, rng, 0.2, 24, 40)
	defer func() {
		for _, v := range []*tensor.Tensor{xv, w1v, w2v} {
			v.Release()
		}
	}()
	run := func(kept bool) (y []float64, grads [][]float64, leftover int64) {
		c := tensor.NewCtx()
		base := dev.Memory().Stats().Total.Requested.Current
		var w1, w2 *autograd.Var
		if kept {
			w1, w2 = autograd.Param(w1v.Clone(), "w1"), autograd.Param(w2v.Clone(), "w2")
		}
		c.WithScope(func() {
			if !kept {
				w1, w2 = autograd.Const(c.Adopt(w1v.Clone())), autograd.Const(c.Adopt(w2v.Clone()))
				w1.SetRequiresGrad(true)
				w2.SetRequiresGrad(true)
			}
			x := autograd.Const(c.Adopt(xv.Clone()))
			x.SetRequiresGrad(true)
			var loss *autograd.Var
			amp.Autocast(c, tensor.BFloat16, func() {
				h := autograd.GeluLinear(autograd.Linear(x, w1, nil), w2, nil)
				y = h.Value.Float64s()
				loss = autograd.Sum(h, false)
			})
			require.NoError(t, loss.Backward())
			for _, v := range []*autograd.Var{x, w1, w2} {
				grads = append(grads, v.Grad.Float64s())
				v.ZeroGrad()
			}
		})
		if kept {
			w1.Value.Release()
			w2.Value.Release()
		}
		return y, grads, dev.Memory().Stats().Total.Requested.Current - base
	}
	y0, g0, _ := run(false)
	y1, g1, left := run(true)
	require.Equal(t, y0, y1, "output")
	require.Equal(t, g0, g1, "gradients")
	require.Zero(t, left, "bytes left in use after backward")
}
