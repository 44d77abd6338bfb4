package nn

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Distinct returns an error wrapping tensor.ErrArgument that names the
// first parameter ps lists twice, by its variable (an optimizer would
// update it twice a step, a global norm count its gradient twice, a
// data-parallel group reduce it twice): two *Parameter entries wrapping
// one *autograd.Var are one parameter listed twice. It returns nil when
// none is. A nil entry is an error
// wrapping tensor.ErrArgument too, naming its index. Callers prefix the
// error with their own name.
func Distinct(ps []*Parameter) error {
	seen := make(map[*autograd.Var]int, len(ps))
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return err
		}
		if j, dup := seen[p.Var]; dup {
			if ps[j] != p {
				return fmt.Errorf("parameters %q (at %d) and %q (at %d) wrap the same variable: %w", ps[j].Name, j, p.Name, i, tensor.ErrArgument)
			}
			return fmt.Errorf("parameter %q listed twice (at %d and %d): %w", p.Name, j, i, tensor.ErrArgument)
		}
		seen[p.Var] = i
	}
	return nil
}

// notNil refuses a nil parameter (or one without its var), entry i of a
// list.
func notNil(i int, p *Parameter) error {
	if p == nil || p.Var == nil || p.Value == nil {
		return fmt.Errorf("parameter %d is nil: %w", i, tensor.ErrArgument)
	}
	return nil
}

// distinct is Distinct for nn's op: its error begins "nn: op: ".
func distinct(op string, ps []*Parameter) error {
	if err := Distinct(ps); err != nil {
		return fmt.Errorf("nn: %s: %w", op, err)
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
