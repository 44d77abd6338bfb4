package autograd

import (
	"errors"
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// ErrModified: a tensor that a backward reads was written in place
// between the op's forward and its backward (tensor.Tensor.Version), so
// the gradient would be taken at values the forward never saw: PyTorch's
// "one of the variables needed for gradient computation has been modified
// by an inplace operation". Backward fails with an *tensor.OpError
// wrapping it, naming the op, the tensor and both versions, before that
// op's backward runs.
var ErrModified = errors.New("autograd: a tensor needed for the gradient was modified in place")

// watched is a tensor a node's backward reads, with the version its
// storage had when the op was recorded. of says which it is: input of (a
// var's value) when of >= 0, the output when of == watchOut, saved tensor
// -(of+2) (see savedSlot) below.
type watched struct {
	t   *tensor.Tensor
	ver uint64
	of  int
}

const watchOut = -1

// savedSlot is the of of saved tensor i.
func savedSlot(i int) int { return -2 - i }

// watchAll records the versions of n's inputs' values and saved tensors:
// what a backward written by a user (Record) may read. The ops of this
// package narrow it to what their backward reads (Var.reads).
func (n *node) watchAll() {
	n.watch = n.watchBuf[:0]
	for i, in := range n.inputs {
		if in != nil && in.Value != nil {
			n.watch = append(n.watch, watched{t: in.Value, ver: in.Value.Version(), of: i})
		}
	}
	for i, s := range n.saved {
		if s != nil {
			n.watch = append(n.watch, watched{t: s, ver: s.Version(), of: savedSlot(i)})
		}
	}
}

// reads narrows what v's node checks for in-place writes to the values of
// the inputs whose bit is set in inputs (bit i for input i), and adds its
// output when out is set: the operands its backward reads, as PyTorch
// saves them (Mul keeps b only for a's gradient, say). Saved tensors stay
// checked. It returns v; a var without a node is returned as it is.
func (v *Var) reads(inputs uint64, out bool) *Var {
	n := v.node
	if n == nil {
		return v
	}
	kept := n.watch[:0]
	for _, w := range n.watch {
		if w.of < 0 || inputs&(1<<w.of) != 0 {
			kept = append(kept, w)
		}
	}
	n.watch = kept
	if out {
		n.watch = append(n.watch, watched{t: v.Value, ver: v.Value.Version(), of: watchOut})
	}
	return v
}

// bit is the reads mask of input i when cond holds, else 0.
func bit(i int, cond bool) uint64 {
	if cond {
		return 1 << i
	}
	return 0
}

// versionChecks is off only in TestVersionMasks, which compares what a
// backward computes after a write with and without the check.
var versionChecks = true

// checkVersions panics with an *tensor.OpError wrapping ErrModified when
// a tensor n's backward reads was written in place since the op was
// recorded. A released one is passed over: reading it fails on its own
// (tensor.ErrReleased).
func checkVersions(n *node) {
	if !versionChecks {
		return
	}
	for _, w := range n.watch {
		if w.t.Released() {
			continue
		}
		if now := w.t.Version(); now != w.ver {
			panic(&tensor.OpError{Op: "autograd.Backward", Err: ErrModified,
				Msg: fmt.Sprintf("%s of %s (%v %v) is at version %d, it was at version %d when the op was recorded: "+
					"its backward would read values the forward never saw (write it after Backward, or write a Clone)",
					watchName(n, w), n.op, w.t.DType(), w.t.Shape(), now, w.ver)})
		}
	}
}

// varName is v's name for an error: its Name, else "a constant" or "an
// unnamed parameter".
func varName(v *Var) string {
	switch name := v.Name(); {
	case name != "":
		return name
	case v.requiresGrad:
		return "an unnamed parameter"
	}
	return "a constant"
}

// watchName names w among n's operands.
func watchName(n *node, w watched) string {
	switch {
	case w.of >= 0:
		return fmt.Sprintf("input %d (%s)", w.of, varName(n.inputs[w.of]))
	case w.of == watchOut:
		return "the output"
	default:
		return fmt.Sprintf("saved tensor %d", -2-w.of)
	}
}

// Leaves returns the leaves v's graph reaches (Params and Consts, each
// once, in the order a depth-first walk from v first meets them) without
// going past the vars of stop, which are not returned; v itself when it
// is a leaf not in stop. Activation checkpointing records their versions:
// a region's recomputation reads the parameters and constants its
// function closed over, which are no inputs of the region's node (stop:
// the region's inputs, whose own graphs lie outside it).
func (v *Var) Leaves(stop ...*Var) []*Var {
	if v != nil && v.node == nil && !v.consumed && !slices.Contains(stop, v) {
		return []*Var{v}
	}
	var out []*Var
	walkGraph(v, stop, nil, func(in *Var) {
		if !in.consumed {
			out = append(out, in)
		}
	})
	return out
}

// walkGraph visits, depth first, each var with a node that v's graph
// reaches (v first) with node, and each leaf input with leaf (either may
// be nil), each once, not going past or visiting the vars of stop.
func walkGraph(v *Var, stop []*Var, node, leaf func(*Var)) {
	walkGraphWhere(v, stop, nil, node, leaf)
}

// walkGraphWhere is walkGraph that walks a var with a node (v included)
// only where enter, when not nil, returns true for it: not visited, nor
// past it, otherwise.
func walkGraphWhere(v *Var, stop []*Var, enter func(*Var) bool, node, leaf func(*Var)) {
	if v == nil || v.node == nil || slices.Contains(stop, v) || enter != nil && !enter(v) {
		return
	}
	seen := map[*Var]bool{v: true}
	for _, s := range stop {
		seen[s] = true
	}
	stack := []*Var{v}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if node != nil {
			node(u)
		}
		for _, in := range u.node.inputs {
			if in == nil || seen[in] {
				continue
			}
			seen[in] = true
			switch {
			case in.node != nil:
				if enter == nil || enter(in) {
					stack = append(stack, in)
				}
			case leaf != nil:
				leaf(in)
				leafSources(in, seen, leaf)
			}
		}
	}
}

// leafSources visits, with leaf, the vars a leaf made by an op on
// constants was computed from (Var.from), and theirs, each once.
func leafSources(v *Var, seen map[*Var]bool, leaf func(*Var)) {
	for _, in := range v.from {
		if in == nil || seen[in] {
			continue
		}
		seen[in] = true
		leaf(in)
		leafSources(in, seen, leaf)
	}
}

// Read is a tensor that a backward of a graph reads, with the version it
// had when its op was recorded (see Var.Reads).
type Read struct {
	Tensor  *tensor.Tensor
	Version uint64
}

// Reads returns what the backward functions of v's graph read and check
// for in-place writes (the saved tensors, and the inputs and outputs each
// op's backward uses), without going past the vars of stop, with the
// versions recorded with them: a tensor read by several ops comes once a
// reader. Activation checkpointing checks them before it recomputes: the
// ids and targets a checkpointed function closes over are no vars.
func (v *Var) Reads(stop ...*Var) []Read {
	var out []Read
	walkGraph(v, stop, func(u *Var) {
		for _, w := range u.node.watch {
			out = append(out, Read{Tensor: w.t, Version: w.ver})
		}
		out = append(out, u.node.also...)
	}, nil)
	return out
}

// AlsoReads adds rs to what Reads reports for v, the output of a region
// (RecordRegion), and returns v: the tensors its recomputation reads that
// are neither its inputs nor its saved tensors (the parameters its
// function closed over), which the region checks itself before it
// recomputes. A region whose function runs another one reads those too,
// made again by its recomputation, and so must check them before: it
// finds them with Reads. The engine does not check them. A var that is
// not a region's output is left as it is.
func (v *Var) AlsoReads(rs ...Read) *Var {
	if v != nil && v.node != nil && v.node.region {
		v.node.also = append(v.node.also, rs...)
	}
	return v
}
