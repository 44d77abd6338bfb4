package autograd

import (
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// MatMul returns a @ b for (..., m, k) @ (..., k, n) with broadcast batch
// axes. Backward: da = g @ bᵀ, db = aᵀ @ g, each summed over the batch
// axes its operand was broadcast along (in float32 for half operands
// outside autocast, the gradient returned in the operand's dtype).
//
// Like every product of this package, it follows the autocast state of its
// context (package amp): inside a region the operands are cast to the
// region's dtype and the product accumulates and is returned in float32;
// backward runs its products the same way (precision.go).
func MatMul(a, b *Var) *Var {
	args("MatMul", "a b", a, b)
	pr := precisionOf(a.Value, b.Value)
	out := hooked("MatMul", pr.c, func() *tensor.Tensor { return pr.mm(a.Value, b.Value, false, false, 1) })
	return takesHalfGrad(Record("MatMul", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		ps := pr.products() // g is cast once for both products
		defer ps.release()
		var ga, gb *tensor.Tensor
		if needs(a) {
			ga = sumTo(ps.mm(g, b.Value, false, true, 1), a.Value.Shape())
		}
		if needs(b) {
			if b.Value.Rank() == 2 && a.Value.Rank() > 2 {
				// b was a shared matrix: its gradient sums aᵀ g over the
				// batch, folded into one GEMM.
				gb = foldedTN(ps, a.Value, g)
			} else {
				gb = sumTo(ps.mm(a.Value, g, true, false, 1), b.Value.Shape())
			}
		}
		return []*tensor.Tensor{ga, gb}
	}).reads(bit(0, needs(b))|bit(1, needs(a)), false), pr)
}

// sumTo returns p summed down to shape, releasing p, or p itself when it
// already has that shape. A half p (a product of half operands outside
// autocast) is summed in float32, as arithmetic runs there, and the sum
// returned in p's dtype.
func sumTo(p *tensor.Tensor, shape []int) *tensor.Tensor {
	if slices.Equal(p.Shape(), shape) {
		return p
	}
	dt := p.DType()
	p = retype(p, arithDType(dt))
	r := tensor.SumTo(p, shape)
	p.Release()
	return retype(r, dt)
}

// foldedTN returns x2ᵀ y2, where x (..., p) and y (..., q) with the same
// leading elements are flattened to (N, p) and (N, q): a product summed
// over every leading index in one GEMM (a weight's gradient, aᵀ g over
// all rows at once).
func foldedTN(ps *products, x, y *tensor.Tensor) *tensor.Tensor {
	x2, y2 := as2D(x), as2D(y)
	p := ps.mm(x2, y2, true, false, 1)
	if x2 != x {
		x2.Release()
	}
	if y2 != y {
		y2.Release()
	}
	return p
}

// as2D is x flattened to (N, last axis): x itself when it is 2-D already
// (so products that memoize their operands' casts see the same tensor).
func as2D(x *tensor.Tensor) *tensor.Tensor {
	if x.Rank() == 2 {
		return x
	}
	return flat2D(x)
}

// flat2D is x viewed as (N, last axis), N the product of the other axes.
// N is given, not inferred (Reshape(-1, 0) cannot infer it): a zero-width
// last axis (a Linear with no input features, a product with k = 0) has
// its rows all the same.
func flat2D(x *tensor.Tensor) *tensor.Tensor {
	s := x.Shape()
	return x.Reshape(leadingRows(s), s[len(s)-1])
}

// leadingRows is the product of every axis of shape but the last.
func leadingRows(shape []int) int {
	n := 1
	for _, d := range shape[:len(shape)-1] {
		n *= d
	}
	return n
}

// Linear returns x @ wᵀ + b for x (..., in), w (out, in) and optional b
// (out), the layout of PyTorch's nn.Linear. The batch axes of x are folded
// into one GEMM for the forward and each backward product. Outside
// autocast bfloat16 or float16 operands are multiplied as they are, and
// each gradient is returned in its operand's dtype (the bias's summed in
// float32).
func Linear(x, w, b *Var) *Var {
	args("Linear", "x w b?", x, w, b)
	return linear(x, w, b, false)
}

// LinearHalf is Linear for an output whose only consumer takes it in the
// autocast dtype anyway (the fused attention's q/k/v product): under
// autocast the product is returned in the region's dtype, rounded once
// in the GEMM's epilogue, with the bias added there in that dtype (as
// PyTorch's autocast adds a half bias), instead of in float32 and cast by
// the consumer: one write of half the bytes and no cast pass. Its
// gradient comes in that dtype and is multiplied as it is. Outside
// autocast it is Linear.
func LinearHalf(x, w, b *Var) *Var {
	args("LinearHalf", "x w b?", x, w, b)
	return linear(x, w, b, true)
}

// notScalar panics, naming op, when x is a scalar: the products of
// Linear and GeluLinear take its last axis as their inputs.
func notScalar(op string, x *tensor.Tensor) {
	if x.Rank() == 0 {
		panic(&tensor.OpError{Op: "autograd." + op, Msg: "input is a scalar: want (..., in)", Err: tensor.ErrShape})
	}
}

func linear(x, w, b *Var, half bool) *Var {
	notScalar("Linear", x.Value)
	xs := x.Value.Shape()
	pr := precisionOf(x.Value)
	fwd := pr // the forward's products, half under autocast for LinearHalf
	fwd.halfOut = half
	y := hooked("Linear", pr.c, func() *tensor.Tensor { return linearForward(fwd, x.Value, w, b) })
	wl := savedWeight(pr, x, w)
	v := Record("Linear", y, []*Var{x, w, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		g2 := flat2D(g)
		defer g2.Release()
		ps := pr.products() // g2 is cast once for both products
		defer ps.release()
		var gx *tensor.Tensor
		if needs(x) {
			ps.with(w.Value, wl)
			p := ps.mm(g2, w.Value, false, false, 1) // (N, out) @ (out, in)
			gx = p.Reshape(xs...)
			p.Release()
		}
		gw, gb := linearParamGrads(ps, g2, x.Value, w, b)
		return []*tensor.Tensor{gx, gw, gb}
	}, nonNil(wl)...).reads(bit(0, needs(w))|bit(1, needs(x) && wl == nil), false)
	releaseUnrecorded(v, wl)
	return takesHalfGrad(v, pr)
}

// savedWeight is the cast weight a product's backward saves
// (precision.weightCopy) when it will multiply the output gradient by w
// to give x's gradient; nil when x needs none or no cast is made, and
// under an op hook (checkpointing, which trades time for memory: the
// weight is cast again in backward, as before, instead of a copy of every
// weight being held through the backward pass).
func savedWeight(pr precision, x, w *Var) *tensor.Tensor {
	if !needs(x) || !GradEnabledIn(pr.c) || OpHookIn(pr.c) != nil {
		return nil
	}
	return pr.weightCopy(w.Value)
}

// nonNil returns the non-nil ones of ts.
func nonNil(ts ...*tensor.Tensor) []*tensor.Tensor {
	out := ts[:0:0]
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// releaseUnrecorded releases tensors an op saved for a backward that v,
// recorded without a node (nothing needs its gradient, or a
// checkpoint's first pass without recording), will never run.
func releaseUnrecorded(v *Var, saved ...*tensor.Tensor) {
	if v.node == nil {
		release(saved...) // Release takes nil
	}
}

// GeluLinear returns Linear(Gelu(u), w, b), the second half of a
// transformer MLP, keeping only u for backward: the GELU output (as large
// as u) is freed after the forward and recomputed in backward, where the
// weight gradient needs it (a GELU output an op hook hands back, from a
// selective checkpoint's saved tensors, is kept instead: the product was
// made from it). Same result as the two ops; one activation less per
// block. Under autocast the GELU is written straight in the
// products' dtype (tensor.UnaryTo), and u may be in that dtype too (the
// hidden product made by LinearHalf, as PyTorch's autocast makes it): the
// GELU and its gradient read it widened to float32, and the gradient of u
// is in its dtype. Outside autocast bfloat16 or float16 u, w and b are
// taken as they are, as Linear takes them: the GELU is rounded to u's
// dtype, its gradient computed in float32, and each gradient is returned
// in its operand's dtype.
func GeluLinear(u, w, b *Var) *Var {
	args("GeluLinear", "u w b?", u, w, b)
	return geluLinear(u, w, b, false)
}

// GeluLinearKept is GeluLinear keeping the GELU output for backward, as
// the two ops would: one activation more per block (u's size, in the
// products' dtype) until backward, one GELU pass less there (GPT-2's
// twelve were 0.43 ms of a 25 ms bf16 step on the H200). The same bits as
// GeluLinear.
func GeluLinearKept(u, w, b *Var) *Var {
	args("GeluLinearKept", "u w b?", u, w, b)
	return geluLinear(u, w, b, true)
}

func geluLinear(u, w, b *Var, keep bool) *Var {
	notScalar("GeluLinear", u.Value)
	us := u.Value.Shape()
	pr := precisionOf(u.Value)
	// GELU's output goes only to the product: under autocast it is made
	// in the products' dtype in the same kernel (tensor.UnaryTo), the same
	// bits as GELU then Cast, without the float32 copy.
	gelu := func() *tensor.Tensor { return tensor.UnaryTo(tensor.OpGelu, u.Value, pr.operandDType(u.Value)) }
	var kept *tensor.Tensor // the forward's GELU output, when kept
	y := hooked("GeluLinear", pr.c, func() *tensor.Tensor {
		// A GELU output the op hook hands back (a selective checkpoint's
		// recomputation, its policy saving "Gelu" but not "GeluLinear")
		// is kept for backward: the product was made from it, and it was
		// saved so as not to compute it again.
		made := false
		a := hooked("Gelu", pr.c, func() *tensor.Tensor { made = true; return gelu() })
		if keep || !made {
			kept = a
		} else {
			defer a.Release()
		}
		return linearForward(pr, a, w, b)
	})
	wl := savedWeight(pr, u, w)
	v := Record("GeluLinear", y, []*Var{u, w, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		g2 := flat2D(g)
		defer g2.Release()
		ps := pr.products()
		defer ps.release()
		var gu, gw, gb *tensor.Tensor
		if needs(u) {
			ps.with(w.Value, wl)
			da := ps.mm(g2, w.Value, false, false, 1) // (N, out) @ (out, in)
			// Outside autocast the product of half operands is half: the
			// GELU gradient reads it in float32 (arithmetic runs there).
			da = retype(da, arithDType(da.DType()))
			uf := flat2D(u.Value)
			dt := uf.DType() // under autocast, the half type when u's op takes it
			if wantsHalfGrad(u, pr.st.DType) {
				dt = pr.st.DType
			}
			du := tensor.UnaryBackwardTo(tensor.OpGelu, uf, nil, da, dt)
			gu = du.Reshape(us...)
			for _, t := range []*tensor.Tensor{da, uf, du} {
				t.Release()
			}
		}
		if needs(w) || b != nil && needs(b) {
			var a *tensor.Tensor // the bias's gradient reads no activation
			if needs(w) {
				if a = kept; a == nil {
					a = gelu() // recomputed, only when the weight's gradient needs it
					defer a.Release()
				}
			}
			gw, gb = linearParamGrads(ps, g2, a, w, b)
		}
		return []*tensor.Tensor{gu, gw, gb}
	}, nonNil(kept, wl)...).reads(bit(0, needs(u) || needs(w) && kept == nil)|bit(1, needs(u) && wl == nil), false)
	releaseUnrecorded(v, kept, wl)
	return takesHalfGrad(v, pr)
}

// linearForward computes x @ wᵀ (+ b) over the last axis of x (..., in),
// folding the batch axes of x into one GEMM.
func linearForward(pr precision, x *tensor.Tensor, w, b *Var) *tensor.Tensor {
	xs := x.Shape()
	x2 := flat2D(x)
	ps := pr.products()
	var y2 *tensor.Tensor
	if b != nil {
		y2 = ps.mmBias(x2, w.Value, b.Value, false, true) // the bias in the product's epilogue on a GPU
	} else {
		y2 = ps.mm(x2, w.Value, false, true, 1)
	}
	ps.release()
	x2.Release()
	y := y2.Reshape(append(xs[:len(xs)-1:len(xs)-1], w.Value.Dim(0))...)
	y2.Release()
	return y
}

// linearParamGrads returns the gradients of a Linear's weight and bias
// (nil where not needed) from the 2-D output gradient g2 (N, out) and the
// layer's input a (..., in): gw = g2ᵀ a, gb = Σ rows of g2.
//
// When both are wanted they come from one product: gb is the row sums of
// g2ᵀ as the product takes it (cast to the half type under autocast, as
// PyTorch's autocast sums a half-precision output gradient), from the
// GEMM's epilogue on a GPU (tensor.MatMulRowSums).
func linearParamGrads(ps *products, g2, a *tensor.Tensor, w, b *Var) (gw, gb *tensor.Tensor) {
	wantB := b != nil && needs(b)
	switch {
	case needs(w) && wantB:
		a2 := as2D(a)
		gw, gb = ps.mmRowSums(g2, a2, true, false) // (out, N) @ (N, in), Σ over N of g2
		if a2 != a {
			a2.Release()
		}
		gb = retype(gb, b.Value.DType())
	case needs(w):
		gw = foldedTN(ps, g2, a) // (out, N) @ (N, in)
	case wantB:
		// A half output gradient is summed in float32: under autocast for
		// a float32 b (takesHalfGrad), outside it for a half b, whose
		// gradient is returned in its dtype (arithmetic runs in float32).
		dt := b.Value.DType()
		g, done := inDType(g2, arithDType(dt))
		defer done()
		gb = retype(tensor.Sum(g, false, 0), dt)
	}
	return gw, gb
}
