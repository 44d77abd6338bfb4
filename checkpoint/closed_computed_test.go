package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestClosedOverComputedVar: a checkpointed function that closes
// over a computed var (not a leaf, not an input), which is also used
// outside the region. Without checkpointing this is fine; PyTorch's
// non-reentrant checkpoint gives the same gradients as the plain graph.
func TestClosedOverComputedVar(t *testing.T) {
	for _, first := range []bool{false, true} {
		t.Run(map[bool]string{false: "outside-first", true: "region-first"}[first], func(t *testing.T) { closedOver(t, first) })
	}
}

func closedOver(t *testing.T, regionFirst bool) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() { w.ZeroGrad(); w.Value.Release(); p.ZeroGrad(); p.Value.Release() }()
	run := func(ckpt bool) (gw, gp []float32, err error) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Param(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2), "x")
			h := autograd.Tanh(autograd.Mul(p, autograd.Const(c.Full(cpu, tensor.Float32, 1, 2, 2)))) // computed in c, closed over by the region
			fn := func(in ...*autograd.Var) *autograd.Var {
				return autograd.Mul(autograd.MatMul(in[0], w), h)
			}
			var y *autograd.Var
			if ckpt {
				y = checkpoint.Apply(fn, x)
			} else {
				y = fn(x)
			}
			var sum *autograd.Var
			if regionFirst {
				sum = autograd.Add(autograd.Mul(h, h), y)
			} else {
				sum = autograd.Add(y, autograd.Mul(h, h))
			}
			loss := autograd.Sum(sum, false)
			err = loss.Backward()
			if err == nil {
				gw, gp = w.Grad.Float32s(), p.Grad.Float32s()
			}
			w.ZeroGrad()
			p.ZeroGrad()
			x.ZeroGrad()
			x.Value.Release()
		})
		require.Zero(t, c.BytesInUse())
		return
	}
	wantW, wantP, err := run(false)
	require.NoError(t, err)
	gw, gp, err := run(true)
	require.NoError(t, err)
	require.Equal(t, wantW, gw)
	require.Equal(t, wantP, gp)
}

// TestTwoRegionsShareComputedVar: two checkpointed blocks close over
// one computed var (a mask or positional table made from parameters),
// used nowhere else.
func TestTwoRegionsShareComputedVar(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() { w.ZeroGrad(); w.Value.Release(); p.ZeroGrad(); p.Value.Release() }()
	run := func(ckpt bool) (gw, gp []float32, err error) {
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			h := autograd.Tanh(autograd.Mul(p, autograd.Const(c.Full(cpu, tensor.Float32, 1, 2, 2)))) // in c
			fn := func(in ...*autograd.Var) *autograd.Var {
				return autograd.Mul(autograd.MatMul(in[0], w), h)
			}
			apply := func(x *autograd.Var) *autograd.Var {
				if ckpt {
					return checkpoint.Apply(fn, x)
				}
				return fn(x)
			}
			loss := autograd.Sum(apply(apply(x)), false)
			err = loss.Backward()
			if err == nil {
				gw, gp = w.Grad.Float32s(), p.Grad.Float32s()
			}
			w.ZeroGrad()
			p.ZeroGrad()
		})
		require.Zero(t, c.BytesInUse())
		return
	}
	wantW, wantP, err := run(false)
	require.NoError(t, err)
	gw, gp, err := run(true)
	require.NoError(t, err)
	require.Equal(t, wantW, gw)
	require.Equal(t, wantP, gp)
}
