package autograd

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// This file holds the engine's entries for recomputation (package
// checkpoint builds activation checkpointing on them): RecordRegion, the
// node of a region that differentiates itself in backward, and OpHook,
// through which a context can keep or hand back the outputs of named ops
// (selective checkpointing). Var.BackwardWith is in backward.go.

// RecordRegion makes the var for the output of a region: a computation
// whose backward reaches more than its inputs (a checkpointed function
// whose parameters are leaves inside it). Unlike Record the output
// requires gradients even when no input does, and backward runs with
// recording on in the output's context whatever the grad mode around
// Backward, so it may build and differentiate a graph of its own (with
// RegionGrad, which also serves a Grad pass through the region). backward
// returns one gradient per input, nil where none is needed; saved are
// released after it runs, or by the scope.
// With recording off in out's context it returns a plain leaf, as Record.
func RecordRegion(op string, out *tensor.Tensor, inputs []*Var, backward BackwardFunc, saved ...*tensor.Tensor) *Var {
	if out == nil {
		panic(&tensor.OpError{Op: "autograd.RecordRegion", Msg: fmt.Sprintf("op %s: nil output", op), Err: tensor.ErrArgument})
	}
	v := &Var{Value: out, op: op}
	c := out.Ctx()
	if c != nil && !GradEnabledIn(c) {
		return v
	}
	if backward == nil {
		panic(&tensor.OpError{Op: "autograd.RecordRegion", Msg: fmt.Sprintf("op %s: nil backward function", op), Err: tensor.ErrArgument})
	}
	if c == nil {
		c = tensor.Background()
	}
	n := &node{op: op, inputs: inputs, saved: saved, region: true, seq: nodeSeq.Add(1)}
	n.backward = func(g *tensor.Tensor) (grads []*tensor.Tensor) {
		if c == tensor.Background() {
			// A region over kept tensors alone, whose backward may run on
			// goroutines of their own contexts at once: it sets
			// Background's grad state and opens scopes there, so it holds
			// Background while it does.
			tensor.WithBackground(func() { grads = regionBackward(c, n, backward, g) })
			return grads
		}
		return regionBackward(c, n, backward, g)
	}
	v.requiresGrad = true
	v.Value, n.saved = owned(out, inputs, saved) // as Record's
	v.node = n
	v.node.watchAll()
	recordSite(v.node, c)
	return v
}

// regionBackward runs backward, a region node n's in context c, with
// recording on there and the pass stepping n set for RegionGrad.
func regionBackward(c *tensor.Ctx, n *node, backward BackwardFunc, g *tensor.Tensor) []*tensor.Tensor {
	st := stateOf(c)
	old := st.off.Swap(0) // recording on: the region rebuilds its graph
	defer st.off.Store(old)
	outer := st.grad // the Grad pass stepping this node, for RegionGrad
	st.grad = n.grad
	defer func() { st.grad = outer }()
	// The inner pass runs in the region's context, which need not be
	// the outer pass's (a region over parameters alone runs in
	// Background): it reports its hooked leaves to the outer pass, as
	// a pass nested in the same context does, instead of counting and
	// reporting them on its own before the outer pass is over.
	if h := n.hooks; h != nil {
		if cur, _ := c.Value(passKey).(*gradPass); cur == nil {
			c.SetValue(passKey, h)
			defer c.SetValue(passKey, nil)
		}
	}
	return backward(g)
}

// TakesGradLike makes v, the output of a region (RecordRegion), take its
// output gradient in the dtypes u's op takes it in besides its value's
// (node.alsoTakes), and returns v: u is the region's output computed
// inside, whose recomputation gets v's gradient (RegionGrad). The
// engine otherwise converts a gradient to v's dtype before v's backward
// runs: a float32 gradient of a LayerNormHalf's half output, which the
// norm's backward takes as it is in the plain graph, would be rounded to
// the half type at the region's edge. v and u must have one dtype; a v
// that is not a region's output, or a u without a node, is left as it is.
func (v *Var) TakesGradLike(u *Var) *Var {
	if v != nil && v.node != nil && v.node.region && u != nil && u.node != nil && u.Value != nil && u.Value.DType() == v.Value.DType() {
		v.node.alsoTakes |= u.node.alsoTakes
	}
	return v
}

// OpHook intercepts the forward of the ops that consult it, by name, in
// one context: "MatMul", "Linear", "GeluLinear" (its product) and "Gelu"
// (its activation), "CausalAttention", "FusedCausalAttention" (also
// FusedCausalAttentionQKV's), "LayerNorm", "Softmax" and
// "CausalSoftmax". Selective checkpointing implements it: in a region's
// first forward it keeps the outputs its policy says to save, and in the
// recomputation it hands them back instead of computing them again
// (PyTorch's MUST_SAVE and PREFER_RECOMPUTE).
//
// Enter is called as such an op's forward begins. A non-nil result is
// the op's outputs (in the order the op returns them: LayerNorm's are y,
// mean and rstd; FusedCausalAttention's y and the log-sum-exp; the
// others have one), which the op then owns and returns without computing
// anything, and Leave is not called (a result that is not that many live
// tensors is released and the op panics with an *tensor.OpError wrapping
// tensor.ErrArgument); ops whose forward consults the hook again inside
// (GeluLinear's product around its GELU) skip those calls. Otherwise the
// op computes its outputs and calls Leave with them; they belong to the
// op, so a hook that keeps one takes its own reference (Tensor.Alias).
// Calls nest in program order: GeluLinear enters, Gelu enters and
// leaves, GeluLinear leaves.
type OpHook interface {
	Enter(op string) []*tensor.Tensor
	Leave(op string, outs ...*tensor.Tensor)
}

// hookKey is the slot of a context's op hook: an OpHook, or nil.
var hookKey = tensor.NewCtxKey("autograd.ophook")

// WithOpHook runs fn with h as the op hook of context c (nil: none, which
// shields fn from a hook set around it) and restores the previous hook
// afterwards, also when fn panics. A nil c means tensor.Background(); a
// nil fn panics with an *tensor.OpError wrapping tensor.ErrArgument.
func WithOpHook(c *tensor.Ctx, h OpHook, fn func()) {
	if fn == nil {
		panic(&tensor.OpError{Op: "autograd.WithOpHook", Msg: "nil fn", Err: tensor.ErrArgument})
	}
	if c == nil {
		c = tensor.Background()
	}
	var v any
	if h != nil {
		v = h
	}
	old := c.SetValue(hookKey, v)
	defer c.SetValue(hookKey, old)
	fn()
}

// OpHookIn is the op hook of context c, nil when none is set.
func OpHookIn(c *tensor.Ctx) OpHook {
	if c == nil {
		c = tensor.Background()
	}
	h, _ := c.Value(hookKey).(OpHook)
	return h
}

// hooked returns the output of op: the one c's op hook hands back, or
// compute's (reported to the hook). Without a hook it is compute().
func hooked(op string, c *tensor.Ctx, compute func() *tensor.Tensor) *tensor.Tensor {
	return hookedN(op, c, 1, func() []*tensor.Tensor { return []*tensor.Tensor{compute()} })[0]
}

// hooked2 is hooked for an op with two outputs.
func hooked2(op string, c *tensor.Ctx, compute func() (a, b *tensor.Tensor)) (*tensor.Tensor, *tensor.Tensor) {
	outs := hookedN(op, c, 2, func() []*tensor.Tensor { a, b := compute(); return []*tensor.Tensor{a, b} })
	return outs[0], outs[1]
}

// hooked3 is hooked for an op with three outputs.
func hooked3(op string, c *tensor.Ctx, compute func() (a, b, d *tensor.Tensor)) (*tensor.Tensor, *tensor.Tensor, *tensor.Tensor) {
	outs := hookedN(op, c, 3, func() []*tensor.Tensor { a, b, d := compute(); return []*tensor.Tensor{a, b, d} })
	return outs[0], outs[1], outs[2]
}

// hookedN is the hook protocol for an op with n outputs. Outputs handed
// back by Enter that are not n live tensors are released (the op owned
// them) and the op panics with an *tensor.OpError wrapping
// tensor.ErrArgument, naming it.
func hookedN(op string, c *tensor.Ctx, n int, compute func() []*tensor.Tensor) []*tensor.Tensor {
	h := OpHookIn(c)
	if h == nil || c == tensor.Background() && !tensor.InBackgroundScope() {
		// No hook; or Background's, set by a region another goroutine
		// runs there (a checkpointed region over kept tensors alone),
		// which an op over kept tensors alone of this goroutine, working
		// in a context of its own, falls back to: not its region.
		return compute()
	}
	if outs := h.Enter(op); outs != nil {
		problem := ""
		if len(outs) != n {
			problem = fmt.Sprintf("%d outputs, want %d", len(outs), n)
		} else if i := slices.IndexFunc(outs, func(t *tensor.Tensor) bool { return t == nil || t.Released() }); i >= 0 {
			problem = fmt.Sprintf("output %d nil or released", i)
		}
		if problem != "" {
			for _, t := range outs {
				if t != nil {
					t.Release()
				}
			}
			panic(&tensor.OpError{Op: "autograd." + op, Err: tensor.ErrArgument,
				Msg: fmt.Sprintf("op hook %T: Enter(%q) returned %s", h, op, problem)})
		}
		return outs
	}
	outs := compute()
	h.Leave(op, outs...)
	return outs
}
