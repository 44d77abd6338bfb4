package autograd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// GradCheck compares the gradients Backward computes for f at the float64
// inputs xs against central finite differences, PyTorch's gradcheck in
// spirit. f maps input vars to any output; the check differentiates
// sum(f(xs) · r) for a fixed random r, so every output element matters.
// It returns an error naming the input and element of the first mismatch
// when |analytic - numeric| > atol + rtol·|numeric| anywhere, a NaN on
// either side counting as one (as in torch.allclose). Inputs whose Var
// should not get a gradient can be left out of wrt (nil means all). An f
// whose result no checked input reaches through the graph (a constant, a
// detached value) has zero analytic gradients, which the numeric ones must
// match, as in torch's gradcheck. A nil f or f result, no input to check,
// an eps that is not finite and positive, and a negative or NaN tolerance
// are errors wrapping tensor.ErrArgument.
func GradCheck(f func(xs []*Var) *Var, xs []*tensor.Tensor, wrt []bool, eps, atol, rtol float64) error {
	if f == nil {
		return fmt.Errorf("autograd: GradCheck: nil function: %w", tensor.ErrArgument)
	}
	if !(eps > 0) || math.IsInf(eps, 0) || !(atol >= 0) || !(rtol >= 0) {
		return fmt.Errorf("autograd: GradCheck: step eps %g, tolerances atol %g and rtol %g: want a finite eps > 0 and tolerances >= 0: %w", eps, atol, rtol, tensor.ErrArgument)
	}
	if wrt != nil && len(wrt) != len(xs) {
		return fmt.Errorf("autograd: GradCheck: %d wrt flags for %d inputs: %w", len(wrt), len(xs), tensor.ErrArgument)
	}
	if len(xs) == 0 || wrt != nil && !slices.Contains(wrt, true) {
		return fmt.Errorf("autograd: GradCheck: no input to check (%d inputs, wrt %v): %w", len(xs), wrt, tensor.ErrArgument)
	}
	for i, x := range xs {
		if x == nil {
			return fmt.Errorf("autograd: GradCheck: input %d is a nil tensor: %w", i, tensor.ErrArgument)
		}
		if x.DType() != tensor.Float64 && (wrt == nil || wrt[i]) {
			return fmt.Errorf("autograd: GradCheck: input %d is %v; gradient checks run in float64: %w", i, x.DType(), tensor.ErrDType)
		}
	}
	var r *tensor.Tensor
	c := tensor.NewCtx() // its own context: GradCheck may run on any goroutine
	objective := func(vals []*tensor.Tensor, grad bool) (float64, []*tensor.Tensor, error) {
		var out float64
		var grads []*tensor.Tensor
		err := tensor.Try(func() {
			c.WithScope(func() {
				vars := make([]*Var, len(vals))
				for i, v := range vals {
					x := c.Adopt(v.Clone())
					if grad && (wrt == nil || wrt[i]) {
						// Param keeps its tensor; adopted back, the inputs and
						// every op on them (a Narrow piece f never uses, for one)
						// belong to c's scope instead of being orphans no scope
						// frees.
						vars[i] = Param(x, fmt.Sprintf("x%d", i))
						c.Adopt(x)
					} else {
						vars[i] = Const(x)
					}
				}
				y := f(vars)
				if y == nil || y.Value == nil {
					panic(&tensor.OpError{Op: "autograd.GradCheck", Msg: "f returned a nil *autograd.Var or one with no value", Err: tensor.ErrArgument})
				}
				if r == nil {
					rng := rand.New(rand.NewPCG(1, 2))
					r = c.RandN(y.Value.Device(), y.Value.DType(), rng, 1, y.Value.Shape()...)
					tensor.Keep(r)
				}
				s := Sum(Mul(y, Const(r)), false)
				out = s.Item()
				if grad {
					// A result that no checked input reaches through the graph
					// (a constant, a detached value) has zero gradients, which
					// the numeric side must then match, as in torch's gradcheck.
					if s.RequiresGrad() {
						if err := s.Backward(); err != nil {
							panic(&tensor.OpError{Op: "autograd.GradCheck", Msg: "backward", Err: err})
						}
					}
					grads = make([]*tensor.Tensor, len(vars))
					for i, v := range vars {
						grads[i] = v.Grad
					}
				}
			})
		})
		return out, grads, err
	}
	_, grads, err := objective(xs, true)
	defer func() {
		r.Release()
		for _, g := range grads {
			g.Release()
		}
	}()
	if err != nil {
		return err
	}
	for i, x := range xs {
		if wrt != nil && !wrt[i] {
			continue
		}
		var an []float64
		if grads[i] != nil {
			an = grads[i].Float64s()
		} else {
			an = make([]float64, x.Numel())
		}
		base := x.Float64s()
		for j := range base {
			num, err := numeric(c, objective, xs, i, base, j, eps)
			if err != nil {
				return err
			}
			// NaN on either side is a mismatch (as torch.allclose has it),
			// not a comparison that is false; equal infinities match.
			if d := math.Abs(an[j] - num); !(d <= atol+rtol*math.Abs(num)) && an[j] != num {
				return fmt.Errorf("autograd: GradCheck: input %d %v element %d: analytic %.10g, numeric %.10g (diff %.3g)", i, x.Shape(), j, an[j], num, d)
			}
		}
	}
	return nil
}

func numeric(c *tensor.Ctx, obj func([]*tensor.Tensor, bool) (float64, []*tensor.Tensor, error), xs []*tensor.Tensor, i int, base []float64, j int, eps float64) (float64, error) {
	var f [2]float64
	for k, d := range []float64{eps, -eps} {
		pert := append([]float64(nil), base...)
		pert[j] += d
		var err error
		c.WithScope(func() {
			// len(pert) elements first: an empty shape would mean 1-D,
			// not a scalar (FromFloat64s); then the input's own shape.
			flat := c.FromFloat64s(xs[i].Device(), pert, len(pert))
			p := flat.Reshape(xs[i].Shape()...)
			flat.Release()
			vals := append([]*tensor.Tensor(nil), xs...)
			vals[i] = p
			f[k], _, err = obj(vals, false)
		})
		if err != nil {
			return 0, err
		}
	}
	return (f[0] - f[1]) / (2 * eps), nil
}
