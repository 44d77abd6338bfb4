package autograd

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// RegionGrad is the inner backward pass of a region (RecordRegion's
// backward, which package checkpoint builds on): it back-propagates g,
// the gradient of out, through the graph the region rebuilt, and returns
// the gradients of inputs, the leaves the region made for its inputs (by
// Detach): one per input, nil for a nil input, one that does not require
// gradients or that no gradient reaches, and a repeat of an earlier one.
//
// In a Backward pass the leaves the region's function uses inside get
// their gradients added to their Grad, as out.BackwardWith(g) would give
// them. In a Grad pass through the region (the engine tells the region's
// node which pass steps it) no Grad changes: the inner pass is part of
// Grad's, the gradients of Grad's leaves used inside go to Grad's
// results, and what no var of Grad's needs is not run.
//
// g may also be in a dtype out's op takes its gradient in besides its
// value's (a LayerNormHalf's float32 gradient of its half output), which
// a region node made to take it (Var.TakesGradLike) hands on as it came.
//
// The gradients returned are kept out of every scope: the caller owns
// them. On an error none is returned and no leaf of inputs keeps one.
func RegionGrad(out *Var, g *tensor.Tensor, inputs []*Var) ([]*tensor.Tensor, error) {
	if err := out.checkRoot("RegionGrad", g); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("autograd: RegionGrad of %s: nil gradient", out.Name())
	}
	for i, x := range inputs {
		if x != nil && (x.node != nil || x.Grad != nil) {
			return nil, &tensor.OpError{Op: "autograd.RegionGrad", Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("inputs[%d], %s, is not a fresh leaf (a Detach of the region's input, without a gradient)", i, x)}
		}
	}
	// The inputs take their gradients as the plain graph's computed vars
	// do, in the layout their consumers made them (Var.regionIn), so that
	// the engine hands them on upstream of the region as it would without
	// it (a transpose's view, for the product that made the input).
	was := make([]bool, len(inputs))
	for i, x := range inputs {
		if x != nil {
			was[i], x.regionIn = x.regionIn, true
		}
	}
	defer func() {
		for i, x := range inputs {
			if x != nil {
				x.regionIn = was[i]
			}
		}
	}()
	grads := make([]*tensor.Tensor, len(inputs))
	// The region's node set the pass in its context: the recomputed
	// output's, or, for an output made of closed-over parameters alone
	// (no context of its own), the one the engine's gradient belongs to.
	outer := stateOf(out.Value.Ctx()).grad
	if gc := g.Ctx(); outer == nil && out.Value.Ctx() == nil && gc != nil {
		outer = stateOf(gc).grad
	}
	if outer == nil {
		err := out.propagate(g, pass{})
		for i, x := range inputs {
			if x != nil {
				grads[i], x.Grad = x.Grad, nil // nil for a repeated input
			}
		}
		if err != nil {
			release(grads...)
			return nil, err
		}
		return grads, nil
	}
	cp := &capture{index: map[*Var]int{}, out: grads, allowUnused: true, parent: outer, up: map[*Var]bool{}}
	for i, x := range inputs {
		if _, dup := cp.index[x]; x != nil && x.requiresGrad && !dup {
			cp.index[x] = i
			cp.wrt = append(cp.wrt, x)
		}
	}
	for p := outer; p != nil; p = p.parent {
		for w := range p.index {
			if _, own := cp.index[w]; w.node == nil && !own {
				cp.up[w] = true
			}
		}
	}
	if err := out.propagate(g, pass{capture: cp}); err != nil {
		release(cp.out...)
		return nil, err
	}
	return cp.out, nil
}
