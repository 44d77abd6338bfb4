package autograd

import (
	"github.com/strata-ml/strata/tensor"
)

// needs reports whether input i of the op needs a gradient.
func needs(v *Var) bool { return v != nil && v.requiresGrad }

// Add returns a + b with broadcasting.
func Add(a, b *Var) *Var {
	args("Add", "a b", a, b)
	out := tensor.Add(a.Value, b.Value)
	as, bs := a.Value.Shape(), b.Value.Shape()
	return Record("Add", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{sumToIf(needs(a), g, as), sumToIf(needs(b), g, bs)}
	}).reads(0, false)
}

// Sub returns a - b with broadcasting.
func Sub(a, b *Var) *Var {
	args("Sub", "a b", a, b)
	out := tensor.Sub(a.Value, b.Value)
	as, bs := a.Value.Shape(), b.Value.Shape()
	return Record("Sub", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		var gb *tensor.Tensor
		if needs(b) {
			n := tensor.Neg(g)
			gb = tensor.SumTo(n, bs)
			n.Release()
		}
		return []*tensor.Tensor{sumToIf(needs(a), g, as), gb}
	}).reads(0, false)
}

// Mul returns a * b elementwise with broadcasting.
func Mul(a, b *Var) *Var {
	args("Mul", "a b", a, b)
	out := tensor.Mul(a.Value, b.Value)
	return Record("Mul", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{
			mulSumTo(needs(a), g, b.Value, a.Value.Shape()),
			mulSumTo(needs(b), g, a.Value, b.Value.Shape()),
		}
	}).reads(bit(0, needs(b))|bit(1, needs(a)), false)
}

// Div returns a / b elementwise with broadcasting.
func Div(a, b *Var) *Var {
	args("Div", "a b", a, b)
	out := tensor.Div(a.Value, b.Value)
	return Record("Div", out, []*Var{a, b}, func(g *tensor.Tensor) []*tensor.Tensor {
		var ga, gb *tensor.Tensor
		if needs(a) {
			q := tensor.Div(g, b.Value)
			ga = tensor.SumTo(q, a.Value.Shape())
			q.Release()
		}
		if needs(b) { // d(a/b)/db = -a/b² = -out/b
			q := tensor.Div(out, b.Value)
			p := tensor.Mul(g, q)
			n := tensor.Neg(p)
			gb = tensor.SumTo(n, b.Value.Shape())
			q.Release()
			p.Release()
			n.Release()
		}
		return []*tensor.Tensor{ga, gb}
	}).reads(bit(1, true), needs(b))
}

// Affine returns alpha*x + beta.
func Affine(x *Var, alpha, beta float64) *Var {
	args("Affine", "x", x)
	out := tensor.Affine(x.Value, alpha, beta)
	return Record("Affine", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Scale(g, alpha)}
	}).reads(0, false)
}

// Scale returns alpha*x.
func Scale(x *Var, alpha float64) *Var {
	args("Scale", "x", x)
	return Affine(x, alpha, 0)
}

// Neg returns -x.
func Neg(x *Var) *Var {
	args("Neg", "x", x)
	return Affine(x, -1, 0)
}

func sumToIf(need bool, g *tensor.Tensor, shape []int) *tensor.Tensor {
	if !need {
		return nil
	}
	return tensor.SumTo(g, shape)
}

func mulSumTo(need bool, g, other *tensor.Tensor, shape []int) *tensor.Tensor {
	if !need {
		return nil
	}
	p := tensor.Mul(g, other)
	r := tensor.SumTo(p, shape)
	p.Release()
	return r
}
