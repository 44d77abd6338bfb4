package autograd_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestGradThroughCheckpoint: autograd.Grad through checkpointed regions
// (checkpoint.Apply, nested, Sequential) gives the gradients Backward
// gives the same graph without checkpointing, for leaves used inside a
// region (closed over), passed to it, used inside and outside (tied),
// for a computed var before a region and for one after; no leaf's Grad
// changes; Backward through the retained graph still fills them; nothing
// is left in the context.
func TestGradThroughCheckpoint(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	param := func(name string, v ...float32) *autograd.Var {
		return autograd.Param(tensor.FromFloat32s(cpu, v, 2, 2), name)
	}
	w1 := param("w1", 0.5, -1, 2, 0.25)
	w2 := param("w2", 1, 0.5, -0.5, 1)
	w3 := param("w3", -0.3, 0.8, 0.1, 0.6)
	params := []*autograd.Var{w1, w2, w3}
	defer func() {
		for _, p := range params {
			p.Value.Release()
		}
	}()
	x := func() *autograd.Var { return autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, -1, 0.5}, 2, 2)) }
	// The model: h0 = x w1; h1 = tanh(h0 w2) (region A, w2 closed over);
	// h2 = region B(h1, w3) = tanh(region C(h1) w3) with C closing over w1
	// (nested, w1 tied with h0's use); loss = sum(h2 * h2) + sum(h1).
	blockC := func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.MatMul(in[0], w1)) }
	forward := func(ckpt bool) (h0, h1, h2, loss *autograd.Var) {
		apply := func(f func(...*autograd.Var) *autograd.Var, in ...*autograd.Var) *autograd.Var {
			if ckpt {
				return checkpoint.Apply(f, in...)
			}
			return f(in...)
		}
		h0 = autograd.MatMul(x(), w1)
		h1 = apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.MatMul(in[0], w2)) }, h0)
		h2 = apply(func(in ...*autograd.Var) *autograd.Var {
			return autograd.Tanh(autograd.MatMul(apply(blockC, in[0]), in[1]))
		}, h1, w3)
		loss = autograd.Add(autograd.Sum(autograd.Mul(h2, h2), false), autograd.Sum(h1, false))
		return
	}
	// The reference: Backward on the plain graph, h0's and h1's gradients
	// by Retain.
	want := map[string][]float32{}
	c.WithScope(func() {
		h0, h1, _, loss := forward(false)
		h0.Retain()
		h1.Retain()
		require.NoError(t, loss.Backward())
		for _, p := range params {
			want[p.Name()] = p.Grad.Float32s()
			p.ZeroGrad()
		}
		want["h0"], want["h1"] = h0.Grad.Float32s(), h1.Grad.Float32s()
		h0.ZeroGrad()
		h1.ZeroGrad()
	})
	check := func(name string, g *tensor.Tensor) {
		t.Helper()
		require.NotNil(t, g, name)
		require.InDeltaSlice(t, want[name], g.Float32s(), 1e-6, name)
	}
	for _, wrt := range [][]string{{"w1", "w2", "w3"}, {"w1"}, {"w2"}, {"w3"}, {"h0"}, {"h1", "w3"}, {"h0", "w2", "h1"}} {
		c.WithScope(func() {
			h0, h1, _, loss := forward(true)
			vars := map[string]*autograd.Var{"w1": w1, "w2": w2, "w3": w3, "h0": h0, "h1": h1}
			var vs []*autograd.Var
			for _, n := range wrt {
				vs = append(vs, vars[n])
			}
			gs, err := autograd.Grad(loss, vs, autograd.GradOptions{})
			require.NoError(t, err, "%v", wrt)
			for i, n := range wrt {
				check(n, gs[i])
			}
			for _, p := range params {
				require.Nil(t, p.Grad, "%v: Grad fills no leaf's Grad", wrt)
			}
			require.ErrorIs(t, loss.Backward(), autograd.ErrNoGraph, "the graph is consumed")
		})
		require.Zero(t, c.BytesInUse(), "%v", wrt)
	}

	// Retained: Grad, then Backward over the same graph fills the Grads.
	c.WithScope(func() {
		_, _, _, loss := forward(true)
		gs, err := autograd.Grad(loss, []*autograd.Var{w2}, autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
		require.NoError(t, err)
		check("w2", gs[0])
		require.NoError(t, loss.Backward())
		for _, p := range params {
			check(p.Name(), p.Grad)
			p.ZeroGrad()
		}
	})
	require.Zero(t, c.BytesInUse())

	// A leaf not used anywhere: not reached, through the regions too.
	u := param("unused", 1, 1, 1, 1)
	defer u.Value.Release()
	c.WithScope(func() {
		_, _, _, loss := forward(true)
		_, err := autograd.Grad(loss, []*autograd.Var{u}, autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "is not reached from")
		gs, err := autograd.Grad(loss, []*autograd.Var{u, w1}, autograd.GradOptions{AllowUnused: true})
		require.NoError(t, err)
		require.Nil(t, gs[0])
		check("w1", gs[1])
	})
	require.Zero(t, c.BytesInUse())
}

// TestGradThroughParameterOnlyRegion: a region whose result is made of a
// closed-over parameter alone (no context of its own in the
// recomputation) still joins the Grad pass: the parameter's gradient is
// Grad's result, and its Grad stays nil.
func TestGradThroughParameterOnlyRegion(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1}, 2), "w")
	defer w.Value.Release()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{2, 3}, 2))
		h := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(w) }, x)
		gs, err := autograd.Grad(autograd.Sum(autograd.Mul(h, x), false), []*autograd.Var{w}, autograd.GradOptions{})
		require.NoError(t, err)
		th := []float64{math.Tanh(0.5), math.Tanh(-1)}
		require.InDeltaSlice(t, []float64{2 * (1 - th[0]*th[0]), 3 * (1 - th[1]*th[1])}, gs[0].Float64s(), 1e-6)
		require.Nil(t, w.Grad)
	})
	require.Zero(t, c.BytesInUse())
}

// TestGradThroughSequential: Grad through checkpoint.Sequential's
// segments gives Backward's gradients of the parameters inside.
func TestGradThroughSequential(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	ws := make([]*autograd.Var, 4)
	for i := range ws {
		ws[i] = autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5 - 0.1*float32(i), -1, 0.3 * float32(i), 0.25}, 2, 2), "w")
	}
	defer func() {
		for _, w := range ws {
			w.Value.Release()
		}
	}()
	layers := make([]checkpoint.Layer, len(ws))
	for i, w := range ws {
		layers[i] = func(h *autograd.Var) *autograd.Var { return autograd.Tanh(autograd.MatMul(h, w)) }
	}
	x := func() *autograd.Var { return autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, -1, 0.5}, 2, 2)) }
	var want [][]float32
	c.WithScope(func() {
		h := x()
		for _, l := range layers {
			h = l(h)
		}
		require.NoError(t, autograd.Sum(h, false).Backward())
		for _, w := range ws {
			want = append(want, w.Grad.Float32s())
			w.ZeroGrad()
		}
	})
	c.WithScope(func() {
		loss := autograd.Sum(checkpoint.Sequential(2, x(), layers...), false)
		gs, err := autograd.Grad(loss, ws, autograd.GradOptions{})
		require.NoError(t, err)
		for i, w := range ws {
			require.InDeltaSlice(t, want[i], gs[i].Float32s(), 1e-6, "layer %d", i)
			require.Nil(t, w.Grad)
		}
	})
	require.Zero(t, c.BytesInUse())
}

// TestGradThroughClosedOverComputedVar: a region whose function closes
// over a computed var (h, made from p outside it and used outside it too)
// and nests a region that closes over it again: Grad with respect to p,
// h and w, and Backward, give the plain graph's gradients.
func TestGradThroughClosedOverComputedVar(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, -0.5, 0.25}, 2, 2), "p")
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	defer func() { p.Value.Release(); w.Value.Release() }()
	x := func() *autograd.Var { return autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2)) }
	forward := func(ckpt bool) (h, loss *autograd.Var) {
		apply := func(f func(...*autograd.Var) *autograd.Var, in ...*autograd.Var) *autograd.Var {
			if ckpt {
				return checkpoint.Apply(f, in...)
			}
			return f(in...)
		}
		// In c (an op on parameters alone would make an orphan, which the
		// first scope that meets it, a region's, would take).
		h = autograd.Tanh(autograd.Mul(p, autograd.Const(c.Full(cpu, tensor.Float32, 0.5, 2, 2))))
		y := apply(func(in ...*autograd.Var) *autograd.Var {
			inner := apply(func(in2 ...*autograd.Var) *autograd.Var { return autograd.Mul(in2[0], h) }, autograd.MatMul(in[0], w))
			return autograd.Add(inner, h)
		}, x())
		return h, autograd.Add(autograd.Sum(autograd.Mul(y, y), false), autograd.Sum(autograd.Mul(h, h), false))
	}
	want := map[string][]float32{}
	c.WithScope(func() {
		h, loss := forward(false)
		h.Retain()
		require.NoError(t, loss.Backward())
		want["p"], want["w"], want["h"] = p.Grad.Float32s(), w.Grad.Float32s(), h.Grad.Float32s()
		p.ZeroGrad()
		w.ZeroGrad()
		h.ZeroGrad()
	})
	c.WithScope(func() {
		h, loss := forward(true)
		gs, err := autograd.Grad(loss, []*autograd.Var{p, h, w}, autograd.GradOptions{})
		require.NoError(t, err)
		for i, n := range []string{"p", "h", "w"} {
			require.InDeltaSlice(t, want[n], gs[i].Float32s(), 1e-6, n)
		}
		require.Nil(t, p.Grad)
		require.Nil(t, w.Grad)
	})
	c.WithScope(func() {
		_, loss := forward(true)
		require.NoError(t, loss.Backward())
		require.InDeltaSlice(t, want["p"], p.Grad.Float32s(), 1e-6, "Backward: p")
		require.InDeltaSlice(t, want["w"], w.Grad.Float32s(), 1e-6, "Backward: w")
		p.ZeroGrad()
		w.ZeroGrad()
	})
	require.Zero(t, c.BytesInUse())
}
