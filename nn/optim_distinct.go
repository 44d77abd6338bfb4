package nn

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/tensor"
)

// distinct returns an error wrapping tensor.ErrArgument that names the
// first parameter ps lists twice (an optimizer would update it twice a
// step, a global norm count its gradient twice), or nil when none is.
func distinct(op string, ps []*Parameter) error {
	seen := make(map[*Parameter]int, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		if j, dup := seen[p]; dup {
			return fmt.Errorf("nn: %s: parameter %q listed twice (at %d and %d): %w", op, p.Name, j, i, tensor.ErrArgument)
		}
		seen[p] = i
	}
	return nil
}

// checkedParams is the parameter list an optimizer last found distinct,
// so that its step checks Params again only when they have changed (a
// comparison of pointers, without allocating).
type checkedParams []*Parameter

// check is distinct(op, ps), remembering ps when it passes.
func (c *checkedParams) check(op string, ps []*Parameter) error {
	if slices.Equal(*c, ps) {
		return nil
	}
	if err := distinct(op, ps); err != nil {
		return err
	}
	*c = slices.Clone(ps)
	return nil
}
