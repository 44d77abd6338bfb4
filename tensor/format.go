package tensor

import (
	"fmt"
	"strings"
)

// format prints up to 6 values per axis, like PyTorch's repr: float
// dtypes to 4 significant digits, integer dtypes whole.
func format(t *Tensor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor(%v %v on %v", t.dtype, t.shape, t.dev)
	if t.Numel() == 0 {
		b.WriteString(", empty)")
		return b.String()
	}
	vals := t.Float64s() // exact for int32
	verb := "%.4g"
	if !t.dtype.IsFloat() {
		verb = "%.0f"
	}
	b.WriteString(",\n")
	formatAxis(&b, verb, vals, t.shape, 0)
	b.WriteString(")")
	return b.String()
}

// formatAxis prints vals of the given shape, each with the fmt verb.
func formatAxis(b *strings.Builder, verb string, vals []float64, shape []int, indent int) {
	if len(shape) == 0 {
		fmt.Fprintf(b, verb, vals[0])
		return
	}
	n, inner := shape[0], numel(shape[1:])
	b.WriteString("[")
	for i := range n {
		if n > 6 && i > 2 && i < n-3 {
			if i == 3 { // one "..." for the elided entries
				b.WriteString("...")
				if len(shape) > 1 {
					b.WriteString(",\n" + strings.Repeat(" ", indent+1))
				} else {
					b.WriteString(", ")
				}
			}
			continue
		}
		formatAxis(b, verb, vals[i*inner:(i+1)*inner], shape[1:], indent+1)
		if i < n-1 {
			if len(shape) > 1 {
				b.WriteString(",\n" + strings.Repeat(" ", indent+1))
			} else {
				b.WriteString(", ")
			}
		}
	}
	b.WriteString("]")
}
