package autograd

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// GradOptions are the options of Grad.
type GradOptions struct {
	BackwardOptions
	// AllowUnused gives a nil gradient for a var of wrt that out's graph
	// does not reach, where Grad otherwise fails (torch's allow_unused).
	AllowUnused bool
}

// Grad returns the gradients of out (seeded with o.Grad, or ones for a
// scalar out) with respect to each var of wrt, leaves or computed vars:
// torch.autograd.grad(out, wrt). No leaf's Grad changes and no gradient
// hook fires; only the ops between out and the vars of wrt run their
// backward. The gradients are in their vars' dtypes, new tensors of out's
// context's current scope (the caller releases them, or the scope does);
// for an out of no context (of parameters alone), placed as the result of
// an op on kept tensors alone is (see tensor.Ctx).
// The graph is consumed as by Backward, the ops Grad did not need to run
// included (PyTorch frees the whole graph), unless o.RetainGraph.
//
// Checkpointed regions (checkpoint.Apply) are differentiated through:
// a region between out and wrt recomputes itself and runs its inner pass
// as part of Grad's (RegionGrad), and the gradients of leaves of wrt that
// a region's function uses inside go to Grad's results, not to their
// Grad, as torch.autograd.grad through PyTorch's non-reentrant
// checkpoint.
//
// Errors: Backward's; a var of wrt that is nil, does not require
// gradients, or (without o.AllowUnused) is not reached from out, wrapping
// tensor.ErrArgument.
func Grad(out *Var, wrt []*Var, o GradOptions) ([]*tensor.Tensor, error) {
	if err := out.checkRoot("Grad", o.Grad); err != nil {
		return nil, err
	}
	cp := &capture{index: map[*Var]int{}, out: make([]*tensor.Tensor, len(wrt)), allowUnused: o.AllowUnused}
	for i, w := range wrt {
		switch {
		case w == nil:
			return nil, &tensor.OpError{Op: "autograd.Grad", Msg: fmt.Sprintf("wrt[%d] is nil", i), Err: tensor.ErrArgument}
		case !w.requiresGrad:
			return nil, &tensor.OpError{Op: "autograd.Grad", Msg: fmt.Sprintf("wrt[%d], %s, does not require gradients", i, w), Err: tensor.ErrArgument}
		}
		if _, dup := cp.index[w]; !dup {
			cp.index[w] = i
		}
	}
	cp.wrt = wrt
	err := out.propagate(o.Grad, pass{retain: o.RetainGraph, capture: cp})
	if err != nil {
		release(cp.out...)
		return nil, err
	}
	c := out.Value.Ctx()
	for i, w := range wrt {
		j := cp.index[w]
		switch {
		case cp.out[j] == nil && !o.AllowUnused:
			release(cp.out...)
			return nil, &tensor.OpError{Op: "autograd.Grad", Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("wrt[%d], %s, is not reached from %s (AllowUnused gives it a nil gradient)", i, w, out.Name())}
		case j != i && cp.out[j] != nil: // a var given twice: a view of its own each time
			cp.out[i] = cp.out[j].Alias()
			tensor.Keep(cp.out[i])
		}
	}
	for i, g := range cp.out {
		switch {
		case g == nil:
		case c == nil:
			// An out of no context (of parameters alone): placed as an
			// op's result on kept tensors alone is, not in Background,
			// whose innermost scope may be another goroutine's.
			cp.out[i] = g.Alias()
			g.Release()
		default:
			c.Adopt(g) // kept through the pass's scope
		}
	}
	return cp.out, nil
}

// capture is Grad's side of a backward pass: the vars it wants, the
// gradients found so far (kept out of the pass's scope), and which vars'
// backward must run to reach them. A region's inner pass within a Grad
// pass (RegionGrad) has a capture of its own for the region's inputs,
// whose parent is the pass around it: the leaves the parent wants (up
// the chain) are in up, and their gradients go to the parent.
type capture struct {
	wrt         []*Var
	index       map[*Var]int // a var of wrt to its first place
	out         []*tensor.Tensor
	needed      map[*Var]bool // vars with nodes whose backward leads to a var of wrt
	allowUnused bool
	parent      *capture
	up          map[*Var]bool // leaves of the parents' wrt (not of this wrt)
}

// runs reports whether the pass steps v: its backward leads to a var of
// Grad's, or v is one (its gradient is taken, its backward runs only
// when it leads to another).
func (cp *capture) runs(v *Var) bool {
	_, want := cp.index[v]
	return want || cp.needed[v]
}

// leaves reports whether the pass wants the gradient of a leaf, here or
// up the chain: a region's function may use any leaf inside.
func (cp *capture) leaves() bool {
	if len(cp.up) > 0 {
		return true
	}
	for w := range cp.index {
		if w.node == nil {
			return true
		}
	}
	return false
}

// prepare finds the vars whose backward leads to a var of wrt (order is
// topological, inputs first). A checkpointed region's node is needed
// too when the pass wants a leaf's gradient: its function may use the
// leaf inside, where the node's inputs do not show it.
func (cp *capture) prepare(order []*Var) {
	cp.needed = map[*Var]bool{}
	leaves := cp.leaves()
	for _, v := range order {
		want := v.node.region && leaves
		for _, in := range v.node.inputs {
			if in == nil {
				continue
			}
			if _, w := cp.index[in]; w || cp.needed[in] || cp.up[in] {
				want = true
			}
		}
		if want {
			cp.needed[v] = true
		}
	}
}

// take records g, the complete gradient of computed var v, when v is a
// var of Grad's (a copy kept out of the pass's scope: the pass goes on
// with g). A nil cp takes nothing.
func (cp *capture) take(v *Var, g *tensor.Tensor) {
	if cp == nil {
		return
	}
	i, ok := cp.index[v]
	if !ok {
		return
	}
	cp.out[i] = keptCopy(g, v.Value.DType())
}

// keptCopy is a copy of g in dtype dt (one copy, converted as it is
// made), kept out of every scope: the pass goes on with g and releases
// it.
func keptCopy(g *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	r := g.To(dt)
	if r.SharesStorage(g) { // To's view of g in its own dtype
		r.Release()
		r = g.Clone()
	}
	tensor.Keep(r)
	return r
}

// wants reports whether the engine should hand gradient g to input in:
// a computed var of Grad's, or one from which a var of Grad's is
// reached. A leaf of Grad's takes it here instead (summed in its value's
// dtype, kept out of the pass's scope); what no var of Grad's needs is
// dropped (the caller releases g).
func (cp *capture) wants(in *Var, g *tensor.Tensor) bool {
	if in.node != nil {
		return cp.runs(in)
	}
	i, ok := cp.index[in]
	if !ok {
		if cp.up[in] {
			return cp.parent.wants(in, g)
		}
		return false
	}
	dt := in.Value.DType()
	if cp.out[i] == nil {
		if in.regionIn && g.DType() == dt {
			// A region's input: as the engine would hand it on, in its
			// layout (keepGrad).
			cp.out[i] = g.Alias()
			tensor.Keep(cp.out[i])
			return false
		}
		cp.out[i] = keptCopy(g, dt)
		return false
	}
	g, done := inDType(g, dt)
	defer done()
	if in.regionIn && !cp.out[i].Sole() {
		cp.out[i] = regionSum(cp.out[i], g)
		return false
	}
	addGrad(cp.out[i], g) // a half leaf's through float32, as keepGrad sums its Grad
	return false
}
