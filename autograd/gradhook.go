package autograd

import (
	"fmt"
	"sync/atomic"

	"github.com/strata-ml/strata/tensor"
)

// Gradient-ready hooks: PyTorch's post-accumulate-grad hooks
// (Tensor.register_post_accumulate_grad_hook), through which data-
// parallel training starts reducing a bucket of gradients while backward
// still computes the others (package dist).
//
// How the engine knows that a leaf is complete: a leaf's gradient is the
// sum of one contribution per use, a use being one input slot of one
// node of the graph (a leaf used twice by one op, x*x, has two). At the
// start of a backward pass the graph walk that orders the nodes (topo)
// is scanned once more, when some leaf has a hook, counting each hooked
// leaf's uses. The pass steps the nodes in reverse topological order;
// after a node's step (its backward run, its gradients accumulated into
// the leaves' Grad) every hooked leaf among its inputs loses one use,
// and the leaf whose count reaches zero has had its last contribution:
// its hook runs then, once. A use counts whether or not the node handed
// the leaf a gradient (a node no gradient reached, or a backward that
// returns nil for that input): the leaf is as complete as this pass
// makes it, and the hook reads its Grad as it is (nil when nothing ever
// reached it). A hooked leaf that no node of the graph uses is not
// complete in this pass: its hook does not run.
//
// Regions (RecordRegion: a checkpointed function, whose parameters are
// leaves of a graph the region rebuilds and differentiates inside its
// own backward, with Var.BackwardWith) hide their leaves from the outer
// walk, and one leaf may sit in several regions or in a region and the
// outer graph (tied weights). So while any region node of the outer pass
// has not stepped yet, a leaf whose count reaches zero is deferred, not
// reported: a region still to run may add to it. A backward pass run
// inside a region's backward (recognised as nested by its context: the
// pass in progress in the same tensor.Ctx) counts and reports nothing;
// the hooked leaves its graph uses that the outer pass did not count are
// handed to the outer pass as deferred. When the last region node has
// stepped, every deferred leaf whose own uses are done is reported, in
// the order they became complete. A model without regions therefore
// has each leaf reported as soon as its last use has run; in a model with
// checkpointed blocks, every leaf complete before the last region node
// steps (in a GPT, that of the first block, near the end of backward) is
// reported then: correct, with less to overlap.
//
// The hook runs on the goroutine of the backward pass, inside it (the
// pass's tensor.Ctx scope and gradient role are open): work it queues
// on the device comes after the leaf's gradient and before the rest of
// backward. It must not change the leaf's Grad to another tensor or
// start a backward pass; a panic in it ends the pass as an op's would
// (Backward returns it as an error), and the remaining leaves are not
// reported. Cost without hooks: one atomic load per backward pass.

// gradHook is a leaf's hook and its count in the pass that counts it.
type gradHook struct {
	fn      func(*Var)
	pass    *gradPass // the pass counting the leaf's uses, nil when none
	uses    int       // uses of the leaf in pass not stepped yet
	firedIn *gradPass // the pass that last reported the leaf
}

// hookedLeaves is the number of leaves with a hook, in the process: zero
// makes every backward pass skip the hooks' bookkeeping.
var hookedLeaves atomic.Int64

// passKey is the slot of a context's outermost backward pass in
// progress that counts hooked leaves: a *gradPass, or nil.
var passKey = tensor.NewCtxKey("autograd.gradpass")

// SetGradHook makes fn run once per backward pass when v's gradient for
// that pass is final: after the last node of the pass that uses v has
// run and added its contribution to v.Grad (see the comment at the top
// of gradhook.go for how it is known, and for checkpointed regions).
// fn gets v; it runs on the backward pass's goroutine, inside the pass,
// and may queue work that reads v.Grad (which is nil if no contribution
// ever reached v). A nil fn removes the hook. v must be a leaf that
// requires gradients; one hook a leaf (a second replaces the first).
//
// Panics with an *tensor.OpError wrapping tensor.ErrArgument (which
// tensor.Try returns) when v is nil, not a leaf, or does not require
// gradients.
func (v *Var) SetGradHook(fn func(*Var)) {
	const op = "autograd.SetGradHook"
	switch {
	case v == nil:
		panic(&tensor.OpError{Op: op, Msg: "nil Var", Err: tensor.ErrArgument})
	case !v.IsLeaf():
		panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("%s is not a leaf (hooks report leaves' accumulated gradients)", v), Err: tensor.ErrArgument})
	case !v.requiresGrad && fn != nil:
		panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("%s does not require gradients", v), Err: tensor.ErrArgument})
	}
	switch {
	case fn == nil && v.hook != nil:
		v.hook = nil
		hookedLeaves.Add(-1)
	case fn != nil && v.hook == nil:
		v.hook = &gradHook{fn: fn}
		hookedLeaves.Add(1)
	case fn != nil:
		v.hook.fn = fn
	}
}

// HasGradHook reports whether v has a gradient-ready hook.
func (v *Var) HasGradHook() bool { return v.hook != nil }

// gradPass is one outermost backward pass's bookkeeping of hooked
// leaves. Its methods are no-ops on a nil pass.
type gradPass struct {
	c           *tensor.Ctx
	regionsLeft int    // region nodes not stepped yet
	deferred    []*Var // leaves complete while regions were left
}

// hookedLeaf is in's hook when in is a hooked leaf gradients flow to.
func hookedLeaf(in *Var) *gradHook {
	if in == nil || in.node != nil || !in.requiresGrad {
		return nil
	}
	return in.hook
}

// beginGradPass counts the uses of the hooked leaves of order, the nodes
// of a pass about to run in context c, and returns the pass (nil when
// there is nothing to count, or when the pass is nested in one of c's
// in progress, which it then tells about leaves it alone uses).
func beginGradPass(c *tensor.Ctx, order []*Var) *gradPass {
	if hookedLeaves.Load() == 0 {
		return nil
	}
	if outer, _ := c.Value(passKey).(*gradPass); outer != nil {
		for _, v := range order {
			for _, in := range v.node.inputs {
				if h := hookedLeaf(in); h != nil && h.pass != outer && h.firedIn != outer {
					h.pass, h.uses = outer, 0
					outer.deferred = append(outer.deferred, in)
				}
			}
		}
		return nil
	}
	p := &gradPass{c: c}
	leaves := 0
	for _, v := range order {
		n := v.node
		if n.region {
			p.regionsLeft++
		}
		for _, in := range n.inputs {
			if h := hookedLeaf(in); h != nil {
				if h.pass != p {
					h.pass, h.uses = p, 0
					leaves++
				}
				h.uses++
			}
		}
	}
	if leaves == 0 && p.regionsLeft == 0 {
		return nil
	}
	c.SetValue(passKey, p)
	return p
}

// stepped is called after node n (the node of a var the pass just
// stepped) has run: its hooked leaves lose a use, and those complete
// are reported, or deferred while regions are left.
func (p *gradPass) stepped(n *node) {
	if p == nil {
		return
	}
	for _, in := range n.inputs {
		h := hookedLeaf(in)
		if h == nil || h.pass != p {
			continue
		}
		if h.uses--; h.uses == 0 {
			if p.regionsLeft == 0 {
				p.fire(in)
			} else {
				p.deferred = append(p.deferred, in)
			}
		}
	}
	if n.region {
		if p.regionsLeft--; p.regionsLeft == 0 {
			ds := p.deferred
			p.deferred = nil
			for _, in := range ds {
				if h := in.hook; h != nil && h.pass == p && h.uses == 0 {
					p.fire(in)
				}
			}
		}
	}
}

// fire reports leaf v complete in pass p.
func (p *gradPass) fire(v *Var) {
	h := v.hook
	h.pass, h.firedIn = nil, p
	h.fn(v)
}

// end closes the pass (also after a failure): nested passes in its
// context no longer report to it.
func (p *gradPass) end() {
	if p == nil {
		return
	}
	if cur, _ := p.c.Value(passKey).(*gradPass); cur == p {
		p.c.SetValue(passKey, nil)
	}
}
