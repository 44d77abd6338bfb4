package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestFnReturnsClosedOverParam: a checkpointed function that returns
// a parameter it closes over (an identity branch of a generic block) must
// leave the parameter alone, as it does for one of its inputs.
func TestFnReturnsClosedOverParam(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2}, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	c := tensor.NewCtx()
	var err error
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{3, 4}, 2))
		y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return w }, x)
		err = autograd.Sum(autograd.Mul(y, x), false).Backward()
	})
	require.False(t, w.Value.Released(), "the parameter was released (Backward: %v)", err)
	require.NoError(t, err)
	require.Equal(t, []float32{3, 4}, w.Grad.Float32s())
}

// TestClosedOverConstThroughConstOp: a constant var the checkpointed
// function closes over, read through an op on constants only (not
// recorded: its output is a leaf made inside the region), written in
// place before Backward. The package doc promises ErrModified for "the
// parameters and constants fn closed over"; the gradient is silently taken
// at the new values instead.
func TestClosedOverConstThroughConstOp(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	var err error
	var gx []float32
	c.WithScope(func() {
		k := autograd.Const(c.FromFloat32s(cpu, []float32{0, 1}, 2))
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1}, 2))
		x.SetRequiresGrad(true)
		y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
			return autograd.Mul(in[0], autograd.Exp(k))
		}, x)
		k.Value.Fill(5) // between the passes
		err = autograd.Sum(y, false).Backward()
		if x.Grad != nil {
			gx = x.Grad.Float32s()
		}
		x.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
	require.ErrorIs(t, err, autograd.ErrModified, "x's gradient came out %v, the plain graph's is [1 2.718]", gx)
}

// TestClosedOverConstThroughNoGradOp: as above with the op on the
// constant run under NoGrad inside the function (its output a leaf whose
// value Leaves did not trace to the constant): written in place before
// Backward, the recomputation read the new values and the gradient came
// out silently different from the plain graph's.
func TestClosedOverConstThroughNoGradOp(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	var err error
	var gx []float32
	c.WithScope(func() {
		k := autograd.Const(c.FromFloat32s(cpu, []float32{0, 1}, 2))
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1}, 2))
		x.SetRequiresGrad(true)
		y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
			var s *autograd.Var
			autograd.NoGradIn(c, func() { s = autograd.Scale(k, 2) })
			return autograd.Mul(in[0], s)
		}, x)
		k.Value.Fill(5) // between the passes
		err = autograd.Sum(y, false).Backward()
		if x.Grad != nil {
			gx = x.Grad.Float32s()
		}
		x.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
	require.ErrorIs(t, err, autograd.ErrModified, "x's gradient came out %v, the plain graph's is [0 2]", gx)
}

// TestRetainGraphTwiceThroughRegion: two backward passes through a
// checkpointed region (RetainGraph on the first) give twice the first
// pass's gradients, with every kind of region, and leave nothing behind.
func TestRetainGraphTwiceThroughRegion(t *testing.T) {
	cpu := tensor.CPU()
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
		w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			x.SetRequiresGrad(true)
			y := o.Apply(func(in ...*autograd.Var) *autograd.Var {
				return autograd.Tanh(autograd.MatMul(autograd.Tanh(autograd.MatMul(in[0], w)), w))
			}, x)
			loss := autograd.Sum(y, false)
			require.NoError(t, loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}), "%+v", o)
			g1, x1 := w.Grad.Float32s(), x.Grad.Float32s()
			require.NoError(t, loss.Backward(), "%+v", o)
			for i := range g1 {
				require.InDelta(t, 2*g1[i], w.Grad.Float32s()[i], 1e-5)
				require.InDelta(t, 2*x1[i], x.Grad.Float32s()[i], 1e-5)
			}
			x.ZeroGrad()
		})
		w.ZeroGrad()
		w.Value.Release()
		require.Zero(t, c.BytesInUse(), "%+v", o)
	}
}

// TestNestedRegionParamModified: a parameter used only inside a
// region nested in another, written in place between the forward pass
// and Backward. A single region fails with ErrModified
// (TestModifiedBeforeRecomputation); the nested one takes the gradients at
// the new values in silence: the outer region's walk of its graph stops
// at the inner region's node, whose inputs do not show w, and the inner
// region that checks w is made again by the outer's recomputation, after
// the write.
func TestNestedRegionParamModified(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	c := tensor.NewCtx()
	var err error
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
		x.SetRequiresGrad(true)
		y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
			return checkpoint.Apply(func(in2 ...*autograd.Var) *autograd.Var {
				return autograd.MatMul(in2[0], w)
			}, autograd.Tanh(in[0]))
		}, x)
		w.Value.Fill(7) // an optimizer step before Backward
		err = autograd.Sum(y, false).Backward()
		x.ZeroGrad()
	})
	require.ErrorIs(t, err, autograd.ErrModified)
}

func TestAnomalyInsideRegion(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	var err error
	c.WithScope(func() {
		autograd.DetectAnomalyIn(c, func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{0, 1}, 2))
			x.SetRequiresGrad(true)
			y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
				return autograd.Mul(autograd.Sqrt(in[0]), autograd.Const(c.FromFloat32s(cpu, []float32{0, 1}, 2)))
			}, x)
			err = autograd.Sum(y, false).Backward()
			x.ZeroGrad()
		})
	})
	require.ErrorIs(t, err, autograd.ErrNaN)
	t.Log(err)
	require.Zero(t, c.BytesInUse())
}

// TestFnReturnsClosedOverConst: a checkpointed function that returns
// a constant it closes over moves it into the scope open at the call:
// the constant, made in an outer scope, is released when that inner
// scope closes, as it is not without checkpointing.
func TestFnReturnsClosedOverConst(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	c.WithScope(func() {
		k := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2}, 2)) // lives in the outer scope
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{3, 4}, 2))
			checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return k }, x)
		})
		require.False(t, k.Value.Released(), "the outer scope's constant was released with the inner scope")
	})
}
