package autograd

import (
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// MatMul returns a @ b for (..., m, k) @ (..., k, n) with broadcast batch
// axes. Backward: da = g @ bᵀ, db = aᵀ @ g, each summed over the batch
// axes its operand was broadcast along.
func MatMul(a, b *Var) *Var {
	out := tensor.MatMul(a.Value, b.Value)
	return Record("MatMul", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		var ga, gb *tensor.Tensor
		if needs(a) {
			ga = matGrad(g, b.Value.T(), a.Value.Shape(), false)
		}
		if needs(b) {
			gb = matGrad(a.Value.T(), g, b.Value.Shape(), true)
		}
		return []*tensor.Tensor{ga, gb}
	})
}

// matGrad computes x @ y summed down to shape, releasing the transposed
// view it was given (first operand when firstIsView, else the second).
func matGrad(x, y *tensor.Tensor, shape []int, firstIsView bool) *tensor.Tensor {
	var p *tensor.Tensor
	if len(shape) == 2 && x.Rank() > 2 && firstIsView {
		// b was a shared matrix: fold the batch into the inner dimension,
		// aᵀ g over all rows at once: (k, B·m) @ (B·m, n).
		p = foldedATB(x, y)
	} else {
		p = tensor.MatMul(x, y)
	}
	if firstIsView {
		x.Release()
	} else {
		y.Release()
	}
	if slices.Equal(p.Shape(), shape) {
		return p
	}
	r := tensor.SumTo(p, shape)
	p.Release()
	return r
}

// foldedATB computes (aᵀ g) summed over the batch as one GEMM, where at is
// the transposed view of a (..., m, k) and g is (..., m, n).
func foldedATB(at, g *tensor.Tensor) *tensor.Tensor {
	s := at.Shape()
	k := s[len(s)-2]
	a := at.T()
	a2 := a.Reshape(-1, k)
	gs := g.Shape()
	g2 := g.Reshape(-1, gs[len(gs)-1])
	a2t := a2.T()
	p := tensor.MatMul(a2t, g2)
	for _, t := range []*tensor.Tensor{a, a2, g2, a2t} {
		t.Release()
	}
	return p
}

// Linear returns x @ wᵀ + b for x (..., in), w (out, in) and optional b
// (out), the layout of PyTorch's nn.Linear. The batch axes of x are folded
// into one GEMM for the forward and each backward product.
func Linear(x, w, b *Var) *Var {
	xs := x.Value.Shape()
	in := xs[len(xs)-1]
	x2 := x.Value.Reshape(-1, in)
	wt := w.Value.T()
	y2 := tensor.MatMul(x2, wt)
	wt.Release()
	if b != nil {
		yb := tensor.Add(y2, b.Value)
		y2.Release()
		y2 = yb
	}
	outShape := append(xs[:len(xs)-1:len(xs)-1], w.Value.Dim(0))
	y := y2.Reshape(outShape...)
	y2.Release()
	inputs := []*Var{x, w, b}
	return Record("Linear", y, inputs, func(g *tensor.Tensor) []*tensor.Tensor {
		g2 := g.Reshape(-1, g.Dim(-1))
		defer g2.Release()
		var gx, gw, gb *tensor.Tensor
		if needs(x) {
			p := tensor.MatMul(g2, w.Value) // (N, out) @ (out, in)
			gx = p.Reshape(xs...)
			p.Release()
		}
		if needs(w) {
			xf := x.Value.Reshape(-1, in)
			g2t := g2.T()
			gw = tensor.MatMul(g2t, xf) // (out, N) @ (N, in)
			xf.Release()
			g2t.Release()
		}
		if b != nil && needs(b) {
			gb = tensor.Sum(g2, false, 0)
		}
		return []*tensor.Tensor{gx, gw, gb}
	})
}

// GeluLinear returns Linear(Gelu(u), w, b), the second half of a
// transformer MLP, keeping only u for backward: the GELU output (as large
// as u) is freed after the forward and recomputed in backward, where the
// weight gradient needs it. Same result as the two ops; one activation
// less per block.
func GeluLinear(u, w, b *Var) *Var {
	us := u.Value.Shape()
	in := us[len(us)-1]
	var y *tensor.Tensor
	tensor.WithScope(func() {
		a := tensor.Gelu(u.Value)
		a2 := a.Reshape(-1, in)
		wt := w.Value.T()
		y2 := tensor.MatMul(a2, wt)
		if b != nil {
			y2 = tensor.Add(y2, b.Value)
		}
		y = y2.Reshape(append(us[:len(us)-1:len(us)-1], w.Value.Dim(0))...)
		tensor.Keep(y)
	})
	tensor.Adopt(y)
	return Record("GeluLinear", y, []*Var{u, w, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		g2 := g.Reshape(-1, g.Dim(-1))
		defer g2.Release()
		var gu, gw, gb *tensor.Tensor
		a := tensor.Gelu(u.Value) // recomputed
		defer a.Release()
		if needs(u) {
			da := tensor.MatMul(g2, w.Value) // (N, out) @ (out, in)
			uf := u.Value.Reshape(-1, in)
			du := tensor.UnaryBackward(tensor.OpGelu, uf, nil, da)
			gu = du.Reshape(us...)
			for _, t := range []*tensor.Tensor{da, uf, du} {
				t.Release()
			}
		}
		if needs(w) {
			af := a.Reshape(-1, in)
			g2t := g2.T()
			gw = tensor.MatMul(g2t, af)
			af.Release()
			g2t.Release()
		}
		if b != nil && needs(b) {
			gb = tensor.Sum(g2, false, 0)
		}
		return []*tensor.Tensor{gu, gw, gb}
	})
}
