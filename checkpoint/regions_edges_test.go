package checkpoint_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestClosedOverRetainedVarSecondPass: a computed var kept with Retain
// and closed over by a checkpointed function holds its Grad from an
// earlier pass (a first loss, or a first pass over a retained graph)
// when backward reaches the region. The plain graph adds the new
// gradient to that Grad; the region refused to recompute
// (autograd.AsLeaves: "has a gradient (Retain): it cannot stand as a
// leaf") and Backward failed.
func TestClosedOverRetainedVarSecondPass(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	type grads struct{ h, w, x []float32 }
	for _, twoLosses := range []bool{false, true} {
		run := func(ckpt bool) (g grads) {
			c := tensor.NewCtx()
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
				x.SetRequiresGrad(true)
				h := autograd.Tanh(autograd.MatMul(x, w)).Retain()
				fn := func(in ...*autograd.Var) *autograd.Var { return autograd.Mul(autograd.Tanh(in[0]), h) }
				var y *autograd.Var
				if ckpt {
					y = checkpoint.Apply(fn, x)
				} else {
					y = fn(x)
				}
				loss := autograd.Sum(y, false)
				if twoLosses { // a first loss of h alone fills h.Grad
					require.NoError(t, autograd.Sum(autograd.Mul(h, h), false).BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
				} else { // a first pass over the retained graph
					require.NoError(t, loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}))
				}
				require.NoError(t, loss.Backward(), "checkpointed: %v", ckpt)
				g = grads{h.Grad.Float32s(), w.Grad.Float32s(), x.Grad.Float32s()}
				h.ZeroGrad()
				x.ZeroGrad()
				w.ZeroGrad()
			})
			require.Zero(t, c.BytesInUse())
			return g
		}
		want := run(false)
		got := run(true)
		require.InDeltaSlice(t, want.h, got.h, 1e-6, "h")
		require.InDeltaSlice(t, want.w, got.w, 1e-6, "w")
		require.InDeltaSlice(t, want.x, got.x, 1e-6, "x")
	}
}

// TestGradHookRegionInOtherContext: a gradient-ready hook (dist starts
// reducing a leaf's gradient there) runs once per pass with the leaf's
// final gradient, also when a checkpointed region runs in another
// context than the backward pass: a region over a parameter, or with no
// inputs, runs in Background (its inputs' context) while the loss is
// computed in the caller's. The region's inner pass did not find the
// outer pass in its context, counted the leaf's uses on its own and
// reported it as soon as they were done: the hook ran once, with the
// region's contribution alone, before the outer graph added its own, and
// never again in that pass.
func TestGradHookRegionInOtherContext(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() {
		for _, v := range []*autograd.Var{w, p} {
			v.SetGradHook(nil)
			v.ZeroGrad()
			v.Value.Release()
		}
	}()
	var fired [][]float32
	w.SetGradHook(func(v *autograd.Var) { fired = append(fired, v.Grad.Float32s()) })
	regions := map[string]func(ckpt bool) *autograd.Var{
		"over a parameter": func(ckpt bool) *autograd.Var {
			fn := func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.Mul(in[0], w)) }
			if ckpt {
				return checkpoint.Apply(fn, p)
			}
			return fn(p)
		},
		"without inputs": func(ckpt bool) *autograd.Var {
			fn := func(...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.Mul(p, w)) }
			if ckpt {
				return checkpoint.Apply(fn)
			}
			return fn()
		},
	}
	for name, region := range regions {
		for _, ckpt := range []bool{false, true} {
			fired = nil
			c := tensor.NewCtx()
			var final []float32
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
				y := region(ckpt)
				// w is also used outside the region, by an op backward
				// reaches after the region's node.
				loss := autograd.Sum(autograd.Mul(autograd.Mul(w, x), y), false)
				require.NoError(t, loss.Backward())
				final = w.Grad.Float32s()
			})
			w.ZeroGrad()
			p.ZeroGrad()
			require.Zero(t, c.BytesInUse())
			require.Equal(t, [][]float32{final}, fired, "%s, checkpointed %v: the hook runs once, with the final gradient", name, ckpt)
		}
	}
}

// TestHalfResultTakesFloat32Gradient: under autocast, a region whose
// result is a LayerNormHalf (nn's LayerNorm.ForwardHalf: the norm written
// in the half type for the products that read it) gets its gradient from
// those products in float32, which the norm's backward takes as it is in
// the plain graph. The region's node rounded it to the half type first
// (the engine converts a gradient to the value's dtype for a node that
// does not take it): the gradients of the norm's parameters and of
// everything below the region came out up to a few per cent off, where
// the package doc promises the plain run's bits.
func TestHalfResultTakesFloat32Gradient(t *testing.T) {
	n := newNet(3)
	defer n.release()
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveOps("LayerNorm")}} {
			run := func(ckpt bool) (grads [][]float32) {
				c := tensor.NewCtx()
				c.WithScope(func() {
					x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(5, 6)), 1, 2, 5, width))
					x.SetRequiresGrad(true)
					var y *autograd.Var
					amp.Autocast(c, dt, func() {
						f := func(in ...*autograd.Var) *autograd.Var {
							return autograd.LayerNormHalf(autograd.Tanh(in[0]), n.lnW, n.lnB, 1e-5)
						}
						var h *autograd.Var
						if ckpt {
							h = o.Apply(f, x)
						} else {
							h = f(x)
						}
						require.Equal(t, dt, h.Value.DType())
						y = autograd.Linear(h, n.w3, nil) // takes h in the half type, gives its gradient in float32
					})
					require.NoError(t, autograd.Sum(y, false).Backward())
					for _, p := range []*autograd.Var{n.lnW, n.lnB, n.w3, x} {
						grads = append(grads, p.Grad.Float32s())
						p.ZeroGrad()
					}
				})
				require.Zero(t, c.BytesInUse())
				return grads
			}
			want, got := run(false), run(true)
			for i := range want {
				for j := range want[i] {
					require.Equal(t, math.Float32bits(want[i][j]), math.Float32bits(got[i][j]),
						"%v, policy %v: gradient %d element %d: %v, want %v", dt, o.Policy != nil, i, j, got[i][j], want[i][j])
				}
			}
		}
	}
}

// TestNestedRegionInOtherContextParamModified: a region over parameters
// alone (its context Background) nested in a region over the caller's
// data (its context the caller's), closing over a parameter written in
// place between the forward pass and Backward. The outer region's walk
// of its graph stops at the inner region's node, whose inputs do not show
// the parameter, and the inner region registered as nested only with a
// region of its own context: the outer recomputation made the inner
// region again after the write, and the gradients were taken at the new
// values in silence (TestNestedRegionParamModified is the same-context
// case, which was caught).
func TestNestedRegionInOtherContextParamModified(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "w")
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 0, 0, 1}, 2, 2), "p")
	defer func() { w.ZeroGrad(); w.Value.Release(); p.ZeroGrad(); p.Value.Release() }()
	for _, write := range []bool{false, true} {
		c := tensor.NewCtx()
		var err error
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			x.SetRequiresGrad(true)
			y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
				inner := checkpoint.Apply(func(in2 ...*autograd.Var) *autograd.Var {
					return autograd.MatMul(in2[0], w) // w closed over
				}, p)
				return autograd.MatMul(autograd.Tanh(in[0]), inner)
			}, x)
			if write {
				w.Value.Fill(7) // an optimizer step before Backward
			}
			err = autograd.Sum(y, false).Backward()
			x.ZeroGrad()
		})
		if write {
			require.ErrorIs(t, err, autograd.ErrModified)
		} else {
			require.NoError(t, err)
		}
		w.ZeroGrad()
		p.ZeroGrad()
		require.Zero(t, c.BytesInUse())
	}
}

// TestRegionOverParametersFreesItsResult: a region whose inputs are all
// parameters (kept tensors) runs in Background; its result was adopted
// there, owned by no scope, where the plain op's result on parameters
// alone is an orphan that joins the caller's scope at the first op that
// meets the caller's data. When backward never reached the region (a
// forward pass without backward, and every step for a region nested in
// another, whose forward pass's copy of the inner region is never
// differentiated) the result was never released: the leak checker
// caught it, and the manager's bytes in use grew.
func TestRegionOverParametersFreesItsResult(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	f := func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(in[0]) }
	for _, nested := range []bool{false, true} {
		for _, backward := range []bool{false, true} {
			before := cpu.Memory().InUse()
			c := tensor.NewCtx()
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
				x.SetRequiresGrad(true)
				var y *autograd.Var
				if nested {
					y = checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
						return autograd.Mul(in[0], checkpoint.Apply(f, w))
					}, x)
				} else {
					y = autograd.Mul(x, checkpoint.Apply(f, w))
				}
				if backward {
					require.NoError(t, autograd.Sum(y, false).Backward())
				}
				x.ZeroGrad()
			})
			w.ZeroGrad()
			require.Equal(t, before, cpu.Memory().InUse(), "nested %v, backward %v: bytes left behind", nested, backward)
		}
	}
}

// TestDroppedInputNamesTheRegion: model code frees with Var.Drop an
// intermediate whose consumers' backward does not read it (the plain
// graph's Backward succeeds); when that var is a checkpointed region's
// input, the recomputation does read it. Backward failed with
// "tensor.Alias: tensor float32 [2 2] (made by MatMul) was released",
// naming neither the region nor the input (Var.Drop's doc promises an
// error naming the op whose backward reads the dropped value).
func TestDroppedInputNamesTheRegion(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "w")
	defer func() { w.ZeroGrad(); w.Value.Release() }()
	for _, ckpt := range []bool{false, true} {
		c := tensor.NewCtx()
		var err error
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			h := autograd.MatMul(x, w)
			f := func(in ...*autograd.Var) *autograd.Var { return autograd.Exp(autograd.Tanh(in[0])) }
			var y *autograd.Var
			if ckpt {
				y = checkpoint.Apply(f, h)
			} else {
				y = f(h)
			}
			h.Drop() // Tanh's backward reads its output, not h
			err = autograd.Sum(y, false).Backward()
		})
		w.ZeroGrad()
		require.Zero(t, c.BytesInUse())
		if !ckpt {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, tensor.ErrReleased)
		require.ErrorContains(t, err, "checkpoint.Apply: input 0 (MatMul float32 [2 2]) was released before backward reached the region")
	}
}

// TestClosedOverParameterTable: a checkpointed function closes over a
// var computed from parameters alone before the region (a table: an
// orphan, which joins the caller's scope at the first op that meets the
// caller's data). The region's first op over it adopted it into the
// region's own scope, which released it as the function returned: the
// region's backward then found it released (the plain graph keeps it in
// the caller's scope). With a parameter passed as an input, the
// recomputation adopted it into its own scope in the same way, and the
// table's own op (Tanh, whose backward reads its output) failed after the
// region: "tensor.TanhBackward: ... was released".
func TestClosedOverParameterTable(t *testing.T) {
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "w")
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() { w.ZeroGrad(); w.Value.Release(); p.ZeroGrad(); p.Value.Release() }()
	fns := map[string]func(tbl *autograd.Var) (checkpoint.Func, func(x *autograd.Var) []*autograd.Var){
		"read with the caller's data": func(tbl *autograd.Var) (checkpoint.Func, func(x *autograd.Var) []*autograd.Var) {
			return func(in ...*autograd.Var) *autograd.Var { return autograd.Mul(autograd.MatMul(in[0], w), tbl) },
				func(x *autograd.Var) []*autograd.Var { return []*autograd.Var{x} }
		},
		"read with a parameter input": func(tbl *autograd.Var) (checkpoint.Func, func(x *autograd.Var) []*autograd.Var) {
			return func(in ...*autograd.Var) *autograd.Var { return autograd.MatMul(in[0], autograd.MatMul(in[1], tbl)) },
				func(x *autograd.Var) []*autograd.Var { return []*autograd.Var{x, w} }
		},
	}
	for name, make := range fns {
		grads := map[bool][]float32{}
		for _, ckpt := range []bool{false, true} {
			c := tensor.NewCtx()
			var err error
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
				tbl := autograd.Tanh(p) // from a parameter alone
				fn, inputs := make(tbl)
				var y *autograd.Var
				if ckpt {
					y = checkpoint.Apply(fn, inputs(x)...)
				} else {
					y = fn(inputs(x)...)
				}
				err = autograd.Sum(y, false).Backward()
				if err == nil {
					grads[ckpt] = p.Grad.Float32s()
				}
			})
			require.NoError(t, err, "%s, checkpointed %v", name, ckpt)
			w.ZeroGrad()
			p.ZeroGrad()
			require.Zero(t, c.BytesInUse())
		}
		require.Equal(t, grads[false], grads[true], name)
	}
}

// TestSelectiveWithParameterInputs: a selective region given parameters
// as inputs whose function multiplies them together (a low-rank weight
// A·B) before using the caller's data. In the forward pass that product,
// of kept tensors alone, runs in no context and does not consult the
// region's op hook; the recomputation adopted the inputs' copies into the
// region's context, so the product consulted the hook there, and Backward
// failed: "the recomputation ran MatMul where the forward pass ran
// nothing (op 1): the checkpointed function is not deterministic".
func TestSelectiveWithParameterInputs(t *testing.T) {
	cpu := tensor.CPU()
	a := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "a")
	b := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "b")
	defer func() { a.ZeroGrad(); a.Value.Release(); b.ZeroGrad(); b.Value.Release() }()
	grads := map[bool][][]float32{}
	for _, ckpt := range []bool{false, true} {
		c := tensor.NewCtx()
		var err error
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			fn := func(in ...*autograd.Var) *autograd.Var {
				return autograd.Tanh(autograd.MatMul(in[0], autograd.MatMul(in[1], in[2])))
			}
			var y *autograd.Var
			if ckpt {
				y = checkpoint.Options{Policy: checkpoint.SaveMatMuls}.Apply(fn, x, a, b)
			} else {
				y = fn(x, a, b)
			}
			err = autograd.Sum(y, false).Backward()
		})
		require.NoError(t, err, "checkpointed %v", ckpt)
		grads[ckpt] = [][]float32{a.Grad.Float32s(), b.Grad.Float32s()}
		a.ZeroGrad()
		b.ZeroGrad()
		require.Zero(t, c.BytesInUse())
	}
	require.Equal(t, grads[false], grads[true])
}
