package autograd

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// The engine's half gradients (takesHalfGrad): a half gradient of a
// float32 value reaches a backward that takes it as it came, any other
// backward widened to float32; a sum of two gradients, a leaf's Grad and a
// retained var's Grad are float32.
func TestHalfGradientsReachOnlyOpsThatTakeThem(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := Const(c.Full(tensor.CPU(), tensor.Float32, 1.5, 2, 3))
		x.SetRequiresGrad(true)
		var seen []tensor.DType
		// producer: y = 2x, whose backward gives its gradient in bfloat16.
		producer := func(in *Var) *Var {
			return Record("producer", tensor.Scale(in.Value, 2), []*Var{in}, func(g *tensor.Tensor) []*tensor.Tensor {
				seen = append(seen, g.DType())
				s := tensor.Scale(g, 2)
				defer s.Release()
				return []*tensor.Tensor{s.To(tensor.BFloat16)}
			})
		}
		// consumer: y = 3u; takes = whether it takes bfloat16 gradients.
		consumer := func(u *Var, takes bool) *Var {
			v := Record("consumer", tensor.Scale(u.Value, 3), []*Var{u}, func(g *tensor.Tensor) []*tensor.Tensor {
				seen = append(seen, g.DType())
				if g.DType() != tensor.Float32 {
					w := g.To(tensor.Float32)
					defer w.Release()
					g = w
				}
				return []*tensor.Tensor{tensor.Scale(g, 3)}
			})
			if takes {
				pr := precision{c: c, st: amp.State{Enabled: true, DType: tensor.BFloat16}}
				takesHalfGrad(v, pr)
			}
			return v
		}
		// x -> a -> b (takes half) -> loss: b's producer hands over bfloat16.
		a := producer(x)
		b := producer(consumer(a, true))
		require.NoError(t, Sum(b, false).Backward())
		require.Equal(t, []tensor.DType{tensor.Float32, tensor.BFloat16, tensor.Float32}, seen,
			"the consumer that takes half gradients gets bfloat16; the producers get float32")
		require.Equal(t, tensor.Float32, x.Grad.DType())
		require.Equal(t, []float64{12, 12, 12, 12, 12, 12}, x.Grad.Float64s()) // b = 2·3·2x
		x.ZeroGrad()

		// A consumer that does not take them gets the gradient widened;
		// two half gradients of one value are summed in float32; a
		// retained var's Grad is float32.
		seen = nil
		u := producer(x).Retain()
		d := Add(consumer(producer(u), false), consumer(producer(u), false))
		require.NoError(t, Sum(d, false).Backward())
		require.NotContains(t, seen, tensor.BFloat16, "no backward here takes half gradients")
		require.Equal(t, tensor.Float32, u.Grad.DType())
		require.Equal(t, []float64{12, 12, 12, 12, 12, 12}, u.Grad.Float64s())
		require.Equal(t, []float64{24, 24, 24, 24, 24, 24}, x.Grad.Float64s())
		u.ZeroGrad()
		x.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}

// Outside autocast, or for a value that is not float32, an op takes no
// half gradients.
func TestTakesHalfGradOnlyUnderAutocast(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := Const(c.Full(tensor.CPU(), tensor.Float32, 1, 2))
		x.SetRequiresGrad(true)
		mk := func(v *tensor.Tensor) *Var {
			return Record("op", v, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{g.Clone()} })
		}
		on := precision{c: c, st: amp.State{Enabled: true, DType: tensor.Float16}}
		n := takesHalfGrad(mk(c.Full(tensor.CPU(), tensor.Float32, 1, 2)), on).node
		require.True(t, n.takes(tensor.Float16))
		require.False(t, n.takes(tensor.BFloat16))
		require.Zero(t, takesHalfGrad(mk(c.Full(tensor.CPU(), tensor.Float32, 1, 2)), precision{c: c}).node.alsoTakes)
		require.Zero(t, takesHalfGrad(mk(c.Full(tensor.CPU(), tensor.Float64, 1, 2)), on).node.alsoTakes)
	})
}
