package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// SetGradDType keeps a float32 leaf's Grad in bf16 or fp16: a single
// gradient is the float32 one rounded once (a bf16 autocast Linear's
// weight, as GPT's blocks have them), a second one is summed in float32
// with the kept one and rounded again; float32 leaves without it are
// untouched. Bad uses are named errors. On the CPU and on CUDA.
func TestHalfLeafGradients(t *testing.T) {
	t.Run("cpu", func(t *testing.T) { testHalfLeafGradients(t, tensor.CPU()) })
	t.Run("cuda", func(t *testing.T) { testHalfLeafGradients(t, attnGPU(t)) })
}

func testHalfLeafGradients(t *testing.T, dev tensor.Device) {
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(41, 42))
			x := c.RandN(dev, tensor.Float32, rng, 1, 2, 9, 24)
			w0 := c.RandN(dev, tensor.Float32, rng, 0.2, 40, 24)
			b0 := c.RandN(dev, tensor.Float32, rng, 1, 40)
			r := c.RandN(dev, tensor.Float32, rng, 1, 2, 9, 40)
			run := func(half bool, twice bool) (wg, bg *tensor.Tensor) {
				w, b := autograd.Param(w0.Clone(), "w"), autograd.Param(b0.Clone(), "b")
				defer w.Value.Release()
				defer b.Value.Release()
				if half {
					require.NoError(t, w.SetGradDType(dt))
					require.Equal(t, dt, w.GradDType())
				}
				amp.Autocast(c, tensor.BFloat16, func() {
					y := autograd.Cast(autograd.LinearHalf(autograd.Const(x), w, b), tensor.Float32)
					loss := autograd.Sum(autograd.Mul(y, autograd.Const(r)), false)
					if twice { // w's second gradient: 3 w summed in
						loss = autograd.Add(loss, autograd.Sum(autograd.Scale(w, 3), false))
					}
					require.NoError(t, loss.Backward())
				})
				wg, bg = c.Adopt(w.Grad.Clone()), c.Adopt(b.Grad.Clone())
				w.ZeroGrad()
				b.ZeroGrad()
				return wg, bg
			}
			wFull, bFull := run(false, false)
			wHalf, bHalf := run(true, false)
			require.Equal(t, dt, wHalf.DType())
			require.Equal(t, tensor.Float32, bHalf.DType(), "a leaf without SetGradDType keeps float32")
			require.Equal(t, bFull.Float64s(), bHalf.Float64s())
			require.Equal(t, wFull.To(dt).Float64s(), wHalf.Float64s(), "%v: the float32 gradient rounded once", dt)

			// Two gradients: the order the engine hands them over is the
			// graph's; either way the sum is of the kept half one and the
			// other, in float32, rounded once.
			wTwice, _ := run(true, true)
			three := c.Full(dev, tensor.Float32, 3, 40, 24)
			a := wFull.To(dt).To(tensor.Float32)
			a.AddInPlace(three)
			b := three.To(dt).To(tensor.Float32)
			b.AddInPlace(wFull)
			got := wTwice.Float64s()
			wantA, wantB := a.To(dt).Float64s(), b.To(dt).Float64s()
			require.True(t, equalF64(got, wantA) || equalF64(got, wantB), "%v: the two gradients' sum rounded as kept", dt)
		})
	}

	c := tensor.NewCtx()
	c.WithScope(func() {
		p := autograd.Param(c.Zeros(dev, tensor.Float32, 3), "p")
		defer p.Value.Release()
		require.ErrorContains(t, p.SetGradDType(tensor.Int32), "float32 value")
		require.ErrorContains(t, p.SetGradDType(tensor.Float64), "float32 value")
		require.NoError(t, p.SetGradDType(tensor.Float32))
		require.Equal(t, tensor.Float32, p.GradDType())
		y := autograd.Scale(p, 2)
		require.ErrorContains(t, y.SetGradDType(tensor.BFloat16), "non-leaf")
		root := autograd.Sum(y, false)
		require.NoError(t, root.Backward())
		root.Value.Release()
		require.ErrorContains(t, p.SetGradDType(tensor.BFloat16), "ZeroGrad first")
		p.ZeroGrad()
		require.NoError(t, p.SetGradDType(tensor.BFloat16))
		d := autograd.Param(c.Zeros(dev, tensor.Float64, 3), "d")
		defer d.Value.Release()
		require.ErrorContains(t, d.SetGradDType(tensor.BFloat16), "float32 value")
	})
}

func equalF64(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
