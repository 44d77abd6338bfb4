package tensor

import (
	"fmt"
	"strings"
)

// formatEdge is how many values String prints at each end of an axis
// longer than twice as many; the others are elided ("...").
const formatEdge = 3

// format prints up to 6 values per axis, like PyTorch's repr: float
// dtypes to 4 significant digits, integer dtypes whole. Only the values
// it prints are copied to the host (see shownValues).
func format(t *Tensor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor(%v %v on %v", t.dtype, t.shape, t.dev)
	if t.Numel() == 0 {
		b.WriteString(", empty)")
		return b.String()
	}
	shown := shownValues(t, 0)
	// Released also when reading it to the host fails (out of memory).
	defer shown.Release()
	vals := shown.Float64s() // exact for int32
	verb := "%.4g"
	if !t.dtype.IsFloat() {
		verb = "%.0f"
	}
	b.WriteString(",\n")
	formatAxis(&b, verb, vals, t.shape, 0)
	b.WriteString(")")
	return b.String()
}

// shownValues returns a contiguous copy of the elements of t that format
// prints, axes from axis on: the first and last formatEdge of every axis
// longer than 2*formatEdge, all of a shorter one. The elided elements
// are never copied, so that printing a large tensor (or a broadcast view
// of a few values, Expand, that no memory could hold whole) copies a few
// values, not all of them.
func shownValues(t *Tensor, axis int) *Tensor {
	if axis == len(t.shape) {
		return t.Clone()
	}
	n := t.shape[axis]
	if n <= 2*formatEdge {
		return shownValues(t, axis+1)
	}
	head := t.Narrow(axis, 0, formatEdge)
	defer head.Release()
	tail := t.Narrow(axis, n-formatEdge, formatEdge)
	defer tail.Release()
	h := shownValues(head, axis+1)
	defer h.Release()
	e := shownValues(tail, axis+1)
	defer e.Release()
	return Concat(axis, h, e)
}

// formatAxis prints the values of a tensor of the given shape, each with
// the fmt verb; vals are the shown ones (shownValues), at most
// 2*formatEdge along each axis.
func formatAxis(b *strings.Builder, verb string, vals []float64, shape []int, indent int) {
	if len(shape) == 0 {
		fmt.Fprintf(b, verb, vals[0])
		return
	}
	// Only the shown rows are visited: a broadcast view (Expand) may be
	// 2^62 long along an axis, and a loop over every index skipping the
	// elided ones would never end.
	n, rows := shape[0], min(shape[0], 2*formatEdge)
	inner := len(vals) / rows
	sep := ", "
	if len(shape) > 1 {
		sep = ",\n" + strings.Repeat(" ", indent+1)
	}
	b.WriteString("[")
	for j := range rows { // j: the row among the shown values
		if n > 2*formatEdge && j == formatEdge { // one "..." for the elided entries
			b.WriteString("..." + sep)
		}
		formatAxis(b, verb, vals[j*inner:(j+1)*inner], shape[1:], indent+1)
		if j < rows-1 {
			b.WriteString(sep)
		}
	}
	b.WriteString("]")
}
