package autograd

import (
	"slices"
	"sync/atomic"

	"github.com/strata-ml/strata/tensor"
)

// nodeSeq counts the nodes recorded in the process, in every context: a
// node's seq is its place in that count (one atomic add a recorded op).
var nodeSeq atomic.Uint64

// NodeMark is the number of nodes recorded so far: the vars whose nodes
// were recorded before a mark taken at the start of a computation are
// those it did not make (Var.Outer).
func NodeMark() uint64 { return nodeSeq.Load() }

// Outer returns the computed vars (vars with a graph) that v's graph
// reaches and that were recorded at or before mark, each once, without
// walking past them or past the vars of stop: the vars a computation that
// took the mark closed over (package checkpoint passes a region's function
// those as inputs of its own). A var recorded in another goroutine after
// the mark counts as the computation's own.
func (v *Var) Outer(mark uint64, stop ...*Var) []*Var {
	var out []*Var
	walkGraphWhere(v, stop, func(u *Var) bool {
		if u.node.seq <= mark {
			out = append(out, u)
			return false
		}
		return true
	}, nil, nil)
	return out
}

// FirstReached returns the vars of among that v's graph reaches, each
// once, in the order Backward's walk from v (topo: depth first, each
// node's inputs in order) first comes to them, without walking past them.
// The backward pass steps the graph above each of them in that order, so
// a region's node that lists its inputs so (package checkpoint) has the
// ops outside it stepped in the order the plain graph's pass steps them:
// a var upstream of two of its inputs then adds up its gradients as there.
func (v *Var) FirstReached(among ...*Var) []*Var {
	var out []*Var
	if v == nil || v.node == nil {
		return nil
	}
	seen := map[*Var]bool{v: true}
	type frame struct {
		v    *Var
		next int
	}
	stack := []frame{{v: v}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next == len(f.v.node.inputs) {
			stack = stack[:len(stack)-1]
			continue
		}
		in := f.v.node.inputs[f.next]
		f.next++
		if in == nil || seen[in] {
			continue
		}
		seen[in] = true
		switch {
		case slices.Contains(among, in):
			out = append(out, in)
		case in.node != nil:
			stack = append(stack, frame{v: in})
		}
	}
	return out
}

// AsLeaves runs fn with each var of vs cut from its graph: a leaf that
// requires a gradient, with no Grad, whose node is given back when fn
// returns (or panics). A region's backward recomputes its function with
// the computed vars it closed over standing as leaves (package
// checkpoint), so that its inner pass stops at them and hands their
// gradients to the outer graph instead of running into it. The Grad of a
// retained var of vs (Retain, filled by an earlier pass) is set aside
// while fn runs and given back after it, with any gradient fn left in
// its place added to it. A nil fn panics with an *tensor.OpError
// wrapping tensor.ErrArgument, the vars untouched.
func AsLeaves(vs []*Var, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: "autograd.AsLeaves", Msg: "nil fn", Err: tensor.ErrArgument})
	}
	nodes := make([]*node, len(vs))
	grads := make([]*tensor.Tensor, len(vs))
	defer func() {
		for i, v := range vs {
			if v == nil {
				continue
			}
			if nodes[i] != nil {
				v.node = nodes[i]
			}
			if g := grads[i]; g != nil {
				if v.Grad != nil {
					addGrad(g, v.Grad) // a half var's through float32, as keepGrad sums it
					v.Grad.Release()
				}
				v.Grad = g
			}
		}
	}()
	for i, v := range vs {
		if v == nil {
			continue
		}
		nodes[i], v.node = v.node, nil
		grads[i], v.Grad = v.Grad, nil
	}
	fn()
}
