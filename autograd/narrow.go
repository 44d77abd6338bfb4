package autograd

import (
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// The gradient of x through pieces Narrow(x, axis, start, n) — the
// attention's split of the fused q, k, v product, for one — would be, per
// piece, a zero tensor of x's shape with the piece's gradient written into
// it, summed over the pieces: for three pieces, three zero fills and two
// additions of the whole tensor, where one write of each piece does. So
// the engine assembles such a gradient in place: the first piece's
// backward allocates x's pending gradient uninitialised and writes its
// slice, later pieces write theirs, and the spans written are recorded;
// each piece's own gradient is freed as soon as it is written (step).
// Before anything reads the pending gradient (x's own backward, or a
// whole gradient arriving from another consumer) the spans no piece wrote
// are zero-filled. A piece overlapping an earlier one falls back to the
// zero-and-add path.

// narrowOf is where a Narrow took its output: axis (non-negative) and the
// first index along it.
type narrowOf struct{ axis, start int }

// sliceSpans records which spans along axis of a var's pending gradient have
// been written; the rest is uninitialised until completeSlices.
type sliceSpans struct {
	axis  int
	spans [][2]int // [start, end), in the order written
}

// depositNarrow writes g, the gradient of n's output, into the pending
// gradient of n's input, and reports whether it could (false: the caller
// runs n's backward, which makes a whole zero-padded gradient).
func depositNarrow(n *node, g *tensor.Tensor) bool {
	in := n.inputs[0]
	if in == nil || !in.requiresGrad || in.node == nil {
		return false // leaves keep their gradient in Grad: the plain path
	}
	axis, start, end := n.narrow.axis, n.narrow.start, n.narrow.start+g.Dim(n.narrow.axis)
	switch {
	case in.pending == nil:
		var buf *tensor.Tensor
		c := tensor.CtxOf(g)
		c.WithRole(gradRole, func() { buf = c.Empty(in.Value.Device(), in.Value.DType(), in.Value.Shape()...) })
		buf.WriteNarrow(axis, start, g)
		in.pending, in.slices = buf, &sliceSpans{axis: axis, spans: [][2]int{{start, end}}}
		return true
	case in.slices != nil && in.slices.axis == axis && !in.slices.overlaps(start, end):
		in.pending.WriteNarrow(axis, start, g)
		in.slices.spans = append(in.slices.spans, [2]int{start, end})
		return true
	}
	return false
}

func (s *sliceSpans) overlaps(start, end int) bool {
	for _, sp := range s.spans {
		if start < sp[1] && sp[0] < end {
			return true
		}
	}
	return false
}

// completeSlices zero-fills the spans of v's pending gradient that no
// Narrow wrote, making it an ordinary gradient.
func completeSlices(v *Var) {
	s := v.slices
	if s == nil {
		return
	}
	v.slices = nil
	spans := slices.Clone(s.spans)
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	at, size := 0, v.pending.Dim(s.axis)
	gap := func(from, to int) {
		if from >= to {
			return
		}
		shape := v.pending.Shape()
		shape[s.axis] = to - from
		c := tensor.CtxOf(v.pending)
		c.WithScope(func() {
			z := c.Zeros(v.pending.Device(), v.pending.DType(), shape...)
			v.pending.WriteNarrow(s.axis, from, z)
		})
	}
	for _, sp := range spans {
		gap(at, sp[0])
		at = max(at, sp[1])
	}
	gap(at, size)
}
