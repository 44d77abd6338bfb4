package checkpoint_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestInputOrderBitForBit: a region whose inputs each go to it alone gives
// the plain run's gradients bit for bit also upstream of them, whatever
// the order its inputs are passed in: here three branches of one var h,
// passed to the region in the reverse of the order its function reaches
// them. The backward pass must step the branches' ops in the plain
// graph's order, or h's three gradients add up grouped otherwise.
func TestInputOrderBitForBit(t *testing.T) {
	cpu := tensor.CPU()
	fn := func(in ...*autograd.Var) *autograd.Var {
		// reaches in[2] first, then in[1], then in[0]
		return autograd.Mul(autograd.Mul(autograd.Tanh(in[2]), autograd.Exp(in[1])), autograd.Gelu(in[0]))
	}
	run := func(ck bool, seed uint64) ([]float32, uint32) {
		c := tensor.NewCtx()
		var g []float32
		var l uint32
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(seed, 2))
			x := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 4, 8)).Detach()
			x.SetRequiresGrad(true)
			h := autograd.Scale(x, 1.5)
			a, b, d := autograd.Tanh(h), autograd.Gelu(h), autograd.Silu(h)
			var y *autograd.Var
			if ck {
				y = checkpoint.Apply(fn, a, b, d)
			} else {
				y = fn(a, b, d)
			}
			loss := autograd.Sum(y, false)
			require.NoError(t, loss.Backward())
			g, l = x.Grad.Float32s(), math.Float32bits(loss.Value.Float32s()[0])
			x.ZeroGrad()
		})
		require.Zero(t, c.BytesInUse())
		return g, l
	}
	for seed := uint64(0); seed < 20; seed++ {
		want, wl := run(false, seed)
		got, gl := run(true, seed)
		require.Equal(t, wl, gl, "loss")
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "seed %d: x's gradient [%d]: %v, want %v", seed, i, got[i], want[i])
		}
	}
}

// TestInputGradLayoutBitForBit: a region whose function transposes its
// input (a head split) gives the plain run's gradients bit for bit
// upstream of it, in a Backward and in a Grad pass: the input's gradient
// (a transpose's view in the plain graph) reaches the product that made
// the input in the same layout, not as a contiguous copy, which the
// product's backward multiplies otherwise.
func TestInputGradLayoutBitForBit(t *testing.T) {
	cpu := tensor.CPU()
	d := make([]float32, 64)
	for i := range d {
		d[i] = float32(math.Sin(float64(3*i+1))) * 0.4
	}
	w := autograd.Param(tensor.FromFloat32s(cpu, d, 8, 8), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	fn := func(in ...*autograd.Var) *autograd.Var {
		return autograd.Reshape(autograd.Transpose(in[0], 0, 1), 2, 3, 8)
	}
	for _, grad := range []bool{true, false} {
		run := func(ck bool, seed uint64) []float32 {
			c := tensor.NewCtx()
			var g []float32
			c.WithScope(func() {
				rng := rand.New(rand.NewPCG(seed, 2))
				x := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 2, 3, 8)).Detach()
				x.SetRequiresGrad(true)
				h := autograd.MatMul(x, autograd.Transpose(w, 0, 1))
				var y *autograd.Var
				if ck {
					y = checkpoint.Apply(fn, h)
				} else {
					y = fn(h)
				}
				r := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 2, 3, 8))
				loss := autograd.Sum(autograd.Mul(y, r), false)
				if grad {
					gs, err := autograd.Grad(loss, []*autograd.Var{x, w}, autograd.GradOptions{})
					require.NoError(t, err)
					g = append(gs[0].Float32s(), gs[1].Float32s()...)
				} else {
					require.NoError(t, loss.Backward())
					g = append(x.Grad.Float32s(), w.Grad.Float32s()...)
					x.ZeroGrad()
					w.ZeroGrad()
				}
			})
			require.Zero(t, c.BytesInUse())
			return g
		}
		for seed := uint64(0); seed < 10; seed++ {
			want, got := run(false, seed), run(true, seed)
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "Grad %v, seed %d: gradient [%d]: %v, want %v", grad, seed, i, got[i], want[i])
			}
		}
	}
}

// TestOffPathInputBitForBit: an input the region's result does not reach
// (fn reads it in a side computation only) is not walked into from the
// region's node, as the plain graph's backward never walks into it from
// the region: the ops above it (here Silu, which the loss reaches later)
// step in the plain graph's order, and h sums its four gradients as
// there. The recomputation still reads the input, whose own value the
// backward pass may have released by then.
func TestOffPathInputBitForBit(t *testing.T) {
	cpu := tensor.CPU()
	fn := func(in ...*autograd.Var) *autograd.Var {
		_ = autograd.Mul(in[1], in[1]) // a side computation
		return autograd.Mul(in[0], in[0])
	}
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
		for _, outside := range []bool{false, true} {
			run := func(ck bool, seed uint64) []float32 {
				c := tensor.NewCtx()
				var g []float32
				c.WithScope(func() {
					rng := rand.New(rand.NewPCG(seed, 2))
					x := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 4, 8)).Detach()
					x.SetRequiresGrad(true)
					h := autograd.Scale(x, 1.5)
					e := autograd.Silu(h)
					a, b, d := autograd.Tanh(e), autograd.Exp(autograd.Scale(h, 0.1)), autograd.Gelu(h)
					var y *autograd.Var
					if ck {
						y = o.Apply(fn, b, a)
					} else {
						y = fn(b, a)
					}
					loss := autograd.Add(autograd.Add(autograd.Add(autograd.Sum(y, false), autograd.Sum(d, false)),
						autograd.Sum(e, false)), autograd.Sum(autograd.Relu(h), false))
					if outside {
						// a's own op steps, releasing a's value, before the
						// region recomputes (it then reads the node's view)
						loss = autograd.Add(loss, autograd.Sum(a, false))
					}
					require.NoError(t, loss.Backward())
					g = x.Grad.Float32s()
					x.ZeroGrad()
				})
				require.Zero(t, c.BytesInUse())
				return g
			}
			for seed := uint64(0); seed < 20; seed++ {
				want, got := run(false, seed), run(true, seed)
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%+v, a used outside %v, seed %d: x's gradient [%d]: %v, want %v", o, outside, seed, i, got[i], want[i])
				}
			}
		}
	}
}
