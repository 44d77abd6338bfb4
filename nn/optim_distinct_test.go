package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestOptimizersRefuseDuplicateParameter: a parameter listed twice would
// be updated twice a step and its gradient counted twice in the global
// norm, so the optimizers' Step, StepGuarded and the clipping refuse it,
// naming it, and change nothing; the check follows Params when it changes,
// also in place.
func TestOptimizersRefuseDuplicateParameter(t *testing.T) {
	tensor.WithScope(func() {
		a := f64Param("a", []float64{0.5, -1, 2, 0.25}, 2, 2)
		b := f64Param("b", []float64{1, 2, -3, 4}, 2, 2)
		defer nn.Release([]*nn.Parameter{a, b})
		g := []float64{3, -4, 0, 0}
		setGrad(a, g)
		setGrad(b, g)
		before := a.Value.Float64s()
		dup := []*nn.Parameter{a, b, a}

		adam := nn.NewAdamW(dup, 0.1, 0.1)
		defer adam.Release()
		sgd := nn.NewSGD(dup, 0.1, 0.9)
		defer sgd.Release()
		for name, step := range map[string]func() error{"AdamW": adam.Step, "SGD": sgd.Step} {
			err := step()
			require.ErrorIs(t, err, tensor.ErrArgument, name)
			require.ErrorContains(t, err, `"a.weight"`, name)
		}
		args, err := tensor.NewAdamWArgs(tensor.CPU())
		require.NoError(t, err)
		defer args.Release()
		require.NoError(t, adam.PrepareGuarded(args))
		require.ErrorIs(t, adam.StepGuarded(args, nil), tensor.ErrArgument)
		_, err = nn.ClipGradNorm(dup, 1)
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, `"a.weight"`)
		guard, err := tensor.NewStepGuard(tensor.CPU())
		require.NoError(t, err)
		defer guard.Release()
		require.ErrorIs(t, nn.ClipGradNormGuarded(dup, nil, 1, guard), tensor.ErrArgument)
		require.Equal(t, before, a.Value.Float64s(), "nothing updated")
		require.Equal(t, g, a.Grad.Float64s(), "nothing clipped")

		// Params fixed: the steps run; changed in place: refused again.
		adam.Params, sgd.Params = []*nn.Parameter{a, b}, []*nn.Parameter{a, b}
		require.NoError(t, adam.Step())
		require.NoError(t, sgd.Step())
		adam.Params[1], sgd.Params[1] = a, a
		require.ErrorIs(t, adam.Step(), tensor.ErrArgument)
		require.ErrorIs(t, sgd.Step(), tensor.ErrArgument)
	})
}
