package checkpoint

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Decision is what a Policy says about one op's output in a checkpointed
// region (PyTorch's CheckpointPolicy).
type Decision int

const (
	// PreferRecompute: compute the output again in backward (the fate of
	// every output of a region without a policy, and of every op that does
	// not consult autograd.OpHook).
	PreferRecompute Decision = iota
	// MustSave: keep the output from the forward pass until backward,
	// where the op hands it back instead of computing it.
	MustSave
)

func (d Decision) String() string {
	if d == MustSave {
		return "must save"
	}
	return "prefer recompute"
}

// Policy decides per op what a region keeps (selective activation
// checkpointing), from the op's name and its outputs (shapes and sizes,
// as PyTorch's policy functions see the op's arguments). The ops that
// consult it are those listed at autograd.OpHook; every other op of a
// region is recomputed.
type Policy func(op string, outs []*tensor.Tensor) Decision

// SaveMatMuls keeps the outputs of the matrix products, the expensive part
// of a transformer block to recompute (MatMul, Linear, GeluLinear's
// product and CausalAttention, whose softmax its own backward recomputes
// in any case), and recomputes the element-wise ops, the norms and the
// softmaxes, which cost little arithmetic per byte they would hold.
func SaveMatMuls(op string, _ []*tensor.Tensor) Decision {
	if isMatMul(op) {
		return MustSave
	}
	return PreferRecompute
}

func isMatMul(op string) bool {
	switch op {
	case "MatMul", "Linear", "GeluLinear", "CausalAttention", "FusedCausalAttention":
		return true
	}
	return false
}

// SaveMatMulsUpTo is SaveMatMuls for products whose outputs hold at most
// maxBytes: the wider ones are recomputed. In a transformer block with
// maxBytes three times the block's input it keeps the q/k/v product, the
// attention and both projections, and recomputes the MLP's 4x expansion
// (c_fc), the largest output for one GEMM of recomputation.
func SaveMatMulsUpTo(maxBytes int64) Policy {
	return saveMatMulsUpTo(maxBytes, func(t *tensor.Tensor) int64 { return int64(t.Numel() * t.DType().Size()) })
}

// SaveMatMulsUpToElements is SaveMatMulsUpTo with the bound counted in
// elements: under autocast some products write the half type (c_fc's 4x
// output) and others float32, and a bound in bytes would keep c_fc's
// half output; in elements the same products are kept as in float32.
// nn.GPT's selective mode uses it, at three times the block's input.
func SaveMatMulsUpToElements(maxElems int64) Policy {
	return saveMatMulsUpTo(maxElems, func(t *tensor.Tensor) int64 { return int64(t.Numel()) })
}

// saveMatMulsUpTo keeps the products whose outputs' size, summed, is at
// most most.
func saveMatMulsUpTo(most int64, size func(*tensor.Tensor) int64) Policy {
	return func(op string, outs []*tensor.Tensor) Decision {
		if !isMatMul(op) {
			return PreferRecompute
		}
		var n int64
		for _, t := range outs {
			n += size(t)
		}
		if n > most {
			return PreferRecompute
		}
		return MustSave
	}
}

// SaveOps returns a policy that keeps the outputs of the named ops.
func SaveOps(ops ...string) Policy {
	ops = slices.Clone(ops)
	return func(op string, _ []*tensor.Tensor) Decision {
		if slices.Contains(ops, op) {
			return MustSave
		}
		return PreferRecompute
	}
}

// recorder is the autograd.OpHook of a region with a policy. In the
// forward pass it lists every op that consults it, in the order they
// enter, with their nesting depth, and keeps an alias of the outputs the
// policy saves; in the recomputation it walks the same list, checks that
// the same ops come in the same order, and hands the saved outputs back
// (skipping the ops nested in a saved one, which do not run).
type recorder struct {
	c         *tensor.Ctx
	policy    Policy
	entries   []entry
	open      []int // entries entered and not yet left (forward pass)
	replaying bool
	next      int // the entry the next op must match (recomputation)
}

// entry is one op of the forward pass.
type entry struct {
	op    string
	depth int
	outs  []*tensor.Tensor // kept aliases of the outputs when saved
}

// hook is r as an OpHook: nil (none) for a region without a policy, which
// also shields the region from the hook of an enclosing region.
func (r *recorder) hook() autograd.OpHook {
	if r == nil {
		return nil
	}
	return r
}

// replay turns r to its recomputation and returns it as the hook.
func (r *recorder) replay() autograd.OpHook {
	if r == nil {
		return nil
	}
	r.replaying, r.next = true, 0
	return r
}

// Enter implements autograd.OpHook.
func (r *recorder) Enter(op string) []*tensor.Tensor {
	if !r.replaying {
		r.entries = append(r.entries, entry{op: op, depth: len(r.open)})
		r.open = append(r.open, len(r.entries)-1)
		return nil
	}
	if r.next == len(r.entries) || r.entries[r.next].op != op {
		want := "nothing"
		if r.next < len(r.entries) {
			want = r.entries[r.next].op
		}
		panic(&tensor.OpError{Op: "checkpoint.Apply", Msg: fmt.Sprintf("the recomputation ran %s where the forward pass ran %s (op %d): the checkpointed function is not deterministic", op, want, r.next), Err: tensor.ErrArgument})
	}
	e := r.entries[r.next]
	r.next++
	if e.outs == nil {
		return nil
	}
	for r.next < len(r.entries) && r.entries[r.next].depth > e.depth {
		r.next++ // ops nested in this one, which does not run now
	}
	outs := make([]*tensor.Tensor, len(e.outs))
	for i, t := range e.outs {
		outs[i] = t.Alias() // the op's own reference; the saved one is released after backward
	}
	return outs
}

// Leave implements autograd.OpHook.
func (r *recorder) Leave(op string, outs ...*tensor.Tensor) {
	if r.replaying {
		return
	}
	i := r.open[len(r.open)-1]
	r.open = r.open[:len(r.open)-1]
	if r.policy(op, outs) != MustSave {
		return
	}
	kept := make([]*tensor.Tensor, len(outs))
	for j, t := range outs {
		kept[j] = t.Alias()
		tensor.Keep(kept[j]) // out of every scope until the region ends: model code may open its own
	}
	r.entries[i].outs = kept
}

// adopt hands the saved outputs to the caller's scope, which frees them if
// backward never reaches the region, and returns them for the region's
// node, whose backward frees them.
func (r *recorder) adopt() []*tensor.Tensor {
	if r == nil {
		return nil
	}
	var saved []*tensor.Tensor
	for _, e := range r.entries {
		for _, t := range e.outs {
			saved = append(saved, r.c.Adopt(t))
		}
	}
	r.open = nil
	return saved
}

// outputs returns the outputs saved so far (nil for a nil recorder).
func (r *recorder) outputs() []*tensor.Tensor {
	if r == nil {
		return nil
	}
	var ts []*tensor.Tensor
	for _, e := range r.entries {
		ts = append(ts, e.outs...)
	}
	return ts
}

// release frees the saved outputs (a region with nothing to recompute, or
// whose function panicked).
func (r *recorder) release() {
	if r == nil {
		return
	}
	for _, e := range r.entries {
		for _, t := range e.outs {
			t.Release()
		}
	}
	r.entries = nil
}

// unfinished describes the saved ops the recomputation did not reach, ""
// when it reached them all.
func (r *recorder) unfinished() string {
	if r == nil || r.next == len(r.entries) {
		return ""
	}
	return fmt.Sprintf("stopped after %d of the forward pass's %d hooked ops (next: %s)", r.next, len(r.entries), r.entries[r.next].op)
}
