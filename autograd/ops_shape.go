package autograd

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// Reshape returns x with a new shape (one dimension may be -1).
func Reshape(x *Var, shape ...int) *Var {
	args("Reshape", "x", x)
	in := x.Value.Shape()
	out := x.Value.Reshape(shape...)
	return Record("Reshape", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Reshape(in...)}
	}).reads(0, false)
}

// Transpose swaps two axes (a view).
func Transpose(x *Var, a, b int) *Var {
	args("Transpose", "x", x)
	out := x.Value.Transpose(a, b)
	return Record("Transpose", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Transpose(a, b)}
	}).reads(0, false)
}

// Permute reorders axes (a view).
func Permute(x *Var, perm ...int) *Var {
	args("Permute", "x", x)
	out := x.Value.Permute(perm...)
	inv := make([]int, len(perm))
	for i, p := range perm {
		if p < 0 {
			p += len(perm)
		}
		inv[p] = i
	}
	return Record("Permute", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Permute(inv...)}
	}).reads(0, false)
}

// Contiguous returns x laid out densely (a copy when it was a strided view).
func Contiguous(x *Var) *Var {
	args("Contiguous", "x", x)
	out := x.Value.Contiguous()
	return Record("Contiguous", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{g.Alias()}
	}).reads(0, false)
}

// Narrow returns elements [start, start+length) of axis (a view).
func Narrow(x *Var, axis, start, length int) *Var {
	args("Narrow", "x", x)
	out := x.Value.Narrow(axis, start, length)
	shape := x.Value.Shape()
	dt, dev := x.Value.DType(), x.Value.Device()
	v := Record("Narrow", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		full := tensor.CtxOf(g).Zeros(dev, dt, shape...)
		full.WriteNarrow(axis, start, g)
		return []*tensor.Tensor{full}
	}).reads(0, false)
	if v.node != nil {
		v.node.narrow = &narrowOf{axis: normAxis(axis, len(shape)), start: start}
	}
	return v
}

// normAxis maps a negative axis to its index among rank dims.
func normAxis(axis, rank int) int {
	if axis < 0 {
		return axis + rank
	}
	return axis
}

// Split cuts axis into pieces of size (the last may be shorter). An
// empty axis gives one empty piece, as Tensor.Split and torch.split do. A
// size below 1 panics with a *tensor.OpError wrapping
// tensor.ErrArgument, as Tensor.Split does.
func Split(x *Var, size, axis int) []*Var {
	args("Split", "x", x)
	if size <= 0 {
		panic(&tensor.OpError{Op: "autograd.Split", Msg: fmt.Sprintf("split size %d", size), Err: tensor.ErrArgument})
	}
	n := x.Value.Dim(axis)
	if n == 0 {
		return []*Var{Narrow(x, axis, 0, 0)}
	}
	var out []*Var
	for s := 0; s < n; s += size {
		out = append(out, Narrow(x, axis, s, min(size, n-s)))
	}
	return out
}

// Sum sums over axes (all when none).
func Sum(x *Var, keepDim bool, axes ...int) *Var {
	args("Sum", "x", x)
	out := tensor.Sum(x.Value, keepDim, axes...)
	shape := x.Value.Shape()
	kept := keptShape(shape, axes)
	return Record("Sum", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		gk := g.Reshape(kept...)
		e := gk.Expand(shape...)
		r := e.Contiguous()
		gk.Release()
		e.Release()
		return []*tensor.Tensor{r}
	}).reads(0, false)
}

// Mean averages over axes (all when none).
func Mean(x *Var, keepDim bool, axes ...int) *Var {
	args("Mean", "x", x)
	out := tensor.Mean(x.Value, keepDim, axes...) // checks the axes first
	shape := x.Value.Shape()
	kept := keptShape(shape, axes)
	n := 1
	for i := range shape {
		if kept[i] == 1 {
			n *= shape[i]
		}
	}
	return Record("Mean", out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		// g / n, as PyTorch's mean backward divides (a product with a
		// rounded 1/n is an ulp off for many gradients).
		gk := g.Reshape(kept...)
		e := gk.Expand(shape...)
		d := tensor.CtxOf(g).Full(g.Device(), g.DType(), float64(n))
		r := tensor.Div(e, d)
		gk.Release()
		e.Release()
		d.Release()
		return []*tensor.Tensor{r}
	}).reads(0, false)
}

// keptShape is shape with the reduced axes set to 1 (axes checked by the
// tensor op; a scalar's axis 0 or -1 reduces nothing).
func keptShape(shape, axes []int) []int {
	k := make([]int, len(shape))
	copy(k, shape)
	if len(shape) == 0 {
		return k
	}
	if len(axes) == 0 {
		for i := range k {
			k[i] = 1
		}
	}
	for _, a := range axes {
		if a < 0 {
			a += len(shape)
		}
		k[a] = 1
	}
	return k
}
