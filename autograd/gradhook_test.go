package autograd_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// hookTrace records, in order, the taps' backward runs ("n3") and the
// hooks' reports ("a"), with each reported leaf's Grad as it was then.
type hookTrace struct {
	events []string
	grads  map[string][][]float32 // a leaf's Grad at each report (nil: none)
}

func (h *hookTrace) hook(v *autograd.Var) {
	h.events = append(h.events, v.Name())
	var g []float32
	if v.Grad != nil {
		g = v.Grad.Float32s()
	}
	h.grads[v.Name()] = append(h.grads[v.Name()], g)
}

func (h *hookTrace) at(e string) int {
	i := slices.Index(h.events, e)
	if i < 0 {
		panic(fmt.Sprintf("%q not in %v", e, h.events))
	}
	return i
}

// tap is the identity, whose backward logs name.
func (h *hookTrace) tap(name string, x *autograd.Var) *autograd.Var {
	return autograd.Record("tap", x.Value.Alias(), []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		h.events = append(h.events, name)
		return []*tensor.Tensor{g.Alias()}
	})
}

// A leaf's hook runs once per backward pass, right after the last node
// using it has run: a leaf used twice by one op (a*a) and by two ops (a,
// b) is reported after its last use, with its final gradient; a leaf
// used by an op that hands it no gradient is reported with none; an
// unused leaf is not reported; the gradients are those of a pass without
// hooks, bit for bit; a second pass reports every leaf again; removing
// the hook stops the reports.
func TestGradHookOncePerLeafAfterLastUse(t *testing.T) {
	c := tensor.NewCtx()
	mk := func(name string, v float64) *autograd.Var {
		return autograd.Param(c.Full(tensor.CPU(), tensor.Float32, v, 3), name)
	}
	a, b, cc, d, q := mk("a", 0.5), mk("b", 2), mk("c", 3), mk("d", 4), mk("q", 5)
	ps := []*autograd.Var{a, b, cc, d, q}
	defer func() {
		for _, p := range ps {
			p.ZeroGrad()
			p.SetGradHook(nil)
			p.Value.Release()
		}
	}()
	h := &hookTrace{grads: map[string][][]float32{}}
	pass := func() {
		c.WithScope(func() {
			p1 := h.tap("n1", autograd.Mul(a, a))
			p2 := h.tap("n2", autograd.Mul(p1, b))
			p3 := h.tap("n3", autograd.Add(p2, b))
			p4 := h.tap("n4", autograd.Mul(p3, cc))
			e := h.tap("n5", autograd.Exp(autograd.Scale(a, 0.1)))
			// q is an input of an op whose backward gives it nothing.
			z := autograd.Record("noGradForQ", e.Value.Alias(), []*autograd.Var{e, q}, func(g *tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{g.Alias(), nil}
			})
			l := autograd.Sum(autograd.Add(p4, z), false)
			require.NoError(t, l.Backward())
			l.Value.Release() // the graph is of parameters alone: in no context, so no scope's
		})
	}
	// The reference: the same pass with no hook.
	pass()
	want := map[string][]float32{}
	for _, p := range ps {
		if p.Grad != nil {
			want[p.Name()] = p.Grad.Float32s()
		}
		p.ZeroGrad()
	}
	h.events = nil
	for _, p := range ps {
		p.SetGradHook(h.hook)
		require.True(t, p.HasGradHook())
	}
	pass()
	require.Less(t, h.at("n4"), h.at("c"))
	require.Less(t, h.at("c"), h.at("n3"), "c, used by the last op only, is reported before backward goes on")
	require.Less(t, h.at("n2"), h.at("b"))
	require.Less(t, h.at("b"), h.at("n1"))
	require.Less(t, h.at("n1"), h.at("a"))
	require.Less(t, h.at("n5"), h.at("a"))
	for _, name := range []string{"a", "b", "c", "q"} {
		require.Len(t, h.grads[name], 1, "%s reported once", name)
	}
	require.NotContains(t, h.grads, "d", "an unused leaf is not reported")
	require.Nil(t, h.grads["q"][0], "q was used, but got no gradient")
	require.Nil(t, q.Grad)
	for _, p := range []*autograd.Var{a, b, cc} {
		require.Equal(t, want[p.Name()], h.grads[p.Name()][0], "%s: the gradient when reported is the final one", p.Name())
		require.Equal(t, want[p.Name()], p.Grad.Float32s(), "%s: hooks change no bit", p.Name())
	}
	pass() // accumulates: each leaf reported again, with twice the gradient
	for _, p := range []*autograd.Var{a, b, cc} {
		require.Len(t, h.grads[p.Name()], 2)
		got := h.grads[p.Name()][1]
		for i := range got {
			require.Equal(t, 2*want[p.Name()][i], got[i])
		}
	}
	require.Len(t, h.grads["q"], 2)
	for _, p := range ps {
		p.SetGradHook(nil)
		require.False(t, p.HasGradHook())
	}
	h.events = nil
	pass()
	require.Equal(t, []string{"n1", "n2", "n3", "n4", "n5"}, slices.Sorted(slices.Values(h.events)),
		"no report after the hooks were removed")
	for _, p := range ps {
		p.ZeroGrad()
	}
	require.Equal(t, 5*a.Value.Bytes(), c.BytesInUse(), "nothing left but the values")
}

// In a graph with regions (RecordRegion, whose backward differentiates a
// graph of its own, as checkpointing does), a leaf used by two regions
// and by the outer graph, and a leaf used by the region that runs first
// only, are reported once, after the last region has run, in the order
// they became complete, with their final gradients.
func TestGradHookRegions(t *testing.T) {
	c := tensor.NewCtx()
	w, u := regionParams(t, c)
	h := &hookTrace{grads: map[string][][]float32{}}
	// region computes f(in) = in*w (*u when withU) again in its backward.
	region := func(name string, in *autograd.Var, withU bool) *autograd.Var {
		f := func(x *autograd.Var) *autograd.Var {
			y := autograd.Mul(x, w)
			if withU {
				y = autograd.Mul(y, u)
			}
			return y
		}
		var out *tensor.Tensor
		autograd.NoGradIn(c, func() { out = f(in).Value })
		return autograd.RecordRegion(name, out, []*autograd.Var{in}, func(g *tensor.Tensor) []*tensor.Tensor {
			h.events = append(h.events, name)
			x := autograd.Const(c.Adopt(in.Value.Alias()))
			x.SetRequiresGrad(in.RequiresGrad())
			if err := f(x).BackwardWith(g); err != nil {
				panic(err)
			}
			return []*tensor.Tensor{x.Grad}
		})
	}
	pass := func() {
		c.WithScope(func() {
			x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 3))
			y1 := region("R1", x, false)
			y2 := region("R2", y1, true) // runs first in backward
			require.NoError(t, autograd.Sum(autograd.Mul(y2, w), false).Backward())
		})
	}
	pass()
	want := [][]float32{w.Grad.Float32s(), u.Grad.Float32s()}
	w.ZeroGrad()
	u.ZeroGrad()
	w.SetGradHook(h.hook)
	u.SetGradHook(h.hook)
	h.events = nil
	pass()
	require.Equal(t, []string{"R2", "R1", "w", "u"}, h.events,
		"both wait for the last region; then w (complete in the outer graph first), u (met in R2's pass)")
	require.Equal(t, [][]float32{want[0]}, h.grads["w"])
	require.Equal(t, [][]float32{want[1]}, h.grads["u"])
}

// SetGradHook refuses what is not a leaf requiring gradients, with an
// *tensor.OpError that tensor.Try returns (it panicked with bare strings,
// which Try passes on as bugs).
func TestGradHookMisuse(t *testing.T) {
	c := tensor.NewCtx()
	w := autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 1, 2), "w")
	defer w.Value.Release()
	c.WithScope(func() {
		y := autograd.Scale(w, 2)
		err := tensor.Try(func() { y.SetGradHook(func(*autograd.Var) {}) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "autograd.SetGradHook: Var(Affine float32 [2] grad=true) is not a leaf (hooks report leaves' accumulated gradients)")
		y.Value.Release() // of a parameter alone: in no scope
		k := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2))
		require.ErrorIs(t, tensor.Try(func() { k.SetGradHook(func(*autograd.Var) {}) }), tensor.ErrArgument)
		k.SetGradHook(nil) // removing nothing is fine
		var nilVar *autograd.Var
		require.ErrorIs(t, tensor.Try(func() { nilVar.SetGradHook(nil) }), tensor.ErrArgument)
	})
}

// The same through package checkpoint (regions as activation
// checkpointing makes them, their recomputation's backward pass nested
// in the outer one through the inputs' context): a leaf used in two
// checkpointed regions and outside them, and one used in one region, are
// each reported once, with their final gradients.
func TestGradHookCheckpoint(t *testing.T) {
	c := tensor.NewCtx()
	w, u := regionParams(t, c)
	h := &hookTrace{grads: map[string][][]float32{}}
	pass := func() {
		c.WithScope(func() {
			x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 3))
			y1 := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.Mul(in[0], w)) }, x)
			y2 := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
				return autograd.Mul(autograd.Tanh(autograd.Mul(in[0], w)), u)
			}, y1)
			require.NoError(t, autograd.Sum(autograd.Mul(y2, w), false).Backward())
		})
	}
	pass()
	want := [][]float32{w.Grad.Float32s(), u.Grad.Float32s()}
	w.ZeroGrad()
	u.ZeroGrad()
	w.SetGradHook(h.hook)
	u.SetGradHook(h.hook)
	pass()
	require.ElementsMatch(t, []string{"w", "u"}, h.events)
	require.Equal(t, [][]float32{want[0]}, h.grads["w"])
	require.Equal(t, [][]float32{want[1]}, h.grads["u"])
}

// regionParams are the region tests' parameters w (1.5) and u (0.5), of
// 3 elements each, released with their gradients and hooks at the end of
// the test.
func regionParams(t *testing.T, c *tensor.Ctx) (w, u *autograd.Var) {
	w = autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 1.5, 3), "w")
	u = autograd.Param(c.Full(tensor.CPU(), tensor.Float32, 0.5, 3), "u")
	t.Cleanup(func() {
		for _, p := range []*autograd.Var{w, u} {
			p.ZeroGrad()
			p.SetGradHook(nil)
			p.Value.Release()
		}
	})
	return w, u
}
