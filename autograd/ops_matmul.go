package autograd

import (
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
	if shapeEq(p.Shape(), shape) {
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
