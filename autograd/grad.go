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
// context's current scope (the caller releases them, or the scope does).
// The graph is consumed as by Backward, the ops Grad did not need to run
// included (PyTorch frees the whole graph), unless o.RetainGraph.
//
// Errors: Backward's; a var of wrt that is nil, does not require
// gradients, or (without o.AllowUnused) is not reached from out, wrapping
// tensor.ErrArgument; a checkpointed region between out and wrt, or any
// in a graph where wrt holds a leaf (checkpoint.Apply recomputes a region
// with a backward pass of its own, which adds its parameters' gradients
// to their Grad, and its node does not show them), also ErrArgument.
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
	c := tensor.CtxOf(out.Value)
	for i, w := range wrt {
		j := cp.index[w]
		switch {
		case cp.out[j] == nil && !o.AllowUnused:
			release(cp.out...)
			return nil, &tensor.OpError{Op: "autograd.Grad", Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("wrt[%d], %s, is not reached from %s%s (AllowUnused gives it a nil gradient)", i, w, out.Name(), cp.hidden())}
		case j != i && cp.out[j] != nil: // a var given twice: a view of its own each time
			cp.out[i] = cp.out[j].Alias()
			tensor.Keep(cp.out[i])
		}
	}
	for _, g := range cp.out {
		if g != nil {
			c.Adopt(g) // kept through the pass's scope
		}
	}
	return cp.out, nil
}

// capture is Grad's side of a backward pass: the vars it wants, the
// gradients found so far (kept out of the pass's scope), and which vars'
// backward must run to reach them.
type capture struct {
	wrt         []*Var
	index       map[*Var]int // a var of wrt to its first place
	out         []*tensor.Tensor
	needed      map[*Var]bool // vars with nodes whose backward leads to a var of wrt
	allowUnused bool
	regions     bool // the graph holds a checkpointed region
}

// runs reports whether the pass steps v: its backward leads to a var of
// Grad's, or v is one (its gradient is taken, its backward runs only
// when it leads to another).
func (cp *capture) runs(v *Var) bool {
	_, want := cp.index[v]
	return want || cp.needed[v]
}

// prepare finds the vars whose backward leads to a var of wrt (order is
// topological, inputs first) and refuses a checkpointed region among them.
func (cp *capture) prepare(order []*Var) error {
	cp.needed = map[*Var]bool{}
	for _, v := range order {
		if v.node.region && !cp.regions {
			cp.regions = true
			// A region's node hides the parameters its function uses:
			// a leaf of wrt may be among them, and the region's backward
			// would add to its Grad instead.
			for i, w := range cp.wrt {
				if w.node == nil {
					return &tensor.OpError{Op: "autograd.Grad", Err: tensor.ErrArgument,
						Msg: fmt.Sprintf("wrt[%d], %s, is a leaf of a graph with a checkpointed region (%s), whose parameters Grad cannot see: use Backward", i, w, v.Name())}
				}
			}
		}
		want := false
		for _, in := range v.node.inputs {
			if in == nil {
				continue
			}
			if _, w := cp.index[in]; w || cp.needed[in] {
				want = true
			}
		}
		if !want {
			continue
		}
		if v.node.region {
			return &tensor.OpError{Op: "autograd.Grad", Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("%s, between the output and wrt, is a checkpointed region: its recomputation's own backward pass adds to the parameters' Grad (use Backward)", v.Name())}
		}
		cp.needed[v] = true
	}
	return nil
}

// hidden is what the error of a var not reached adds when the graph
// holds checkpointed regions, whose insides Grad does not see.
func (cp *capture) hidden() string {
	if !cp.regions {
		return ""
	}
	return ", or used only inside a checkpointed region (checkpoint.Apply: Grad sees its inputs and result, not the parameters inside)"
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
		return false
	}
	dt := in.Value.DType()
	if cp.out[i] == nil {
		cp.out[i] = keptCopy(g, dt)
		return false
	}
	g, done := inDType(g, dt)
	defer done()
	cp.out[i].AddInPlace(g)
	return false
}
