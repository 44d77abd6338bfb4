package tensor_test

// In-place updates of several tensors at once (the multi-tensor scales,
// the optimizers) whose operands share elements: a GPU updates the
// tensors of one launch in parallel, so the result would depend on
// timing, and the CPU's sequential loop reads values it has already
// written. Each is refused before anything is written.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

func TestInPlaceUpdatesRefuseOverlappingOperands(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 10)
		before := x.Float32s()
		a, b := x.Narrow(0, 0, 8), x.Narrow(0, 1, 8) // shifted by one element
		other := func() *tensor.Tensor { return tensor.Ones(cpu, tensor.Float32, 8) }
		m, v := other(), other()
		a2, b2 := []*tensor.Tensor{a, other()}, []*tensor.Tensor{other(), b}
		wd := []float64{0, 0}
		guard, err := tensor.NewStepGuard(cpu)
		require.NoError(t, err)
		defer guard.Release()
		for name, fn := range map[string]func(){
			"ScaleAll":          func() { tensor.ScaleAll([]*tensor.Tensor{a, b}, 2) },
			"ScaleAll twice":    func() { tensor.ScaleAll([]*tensor.Tensor{a, a}, 2) },
			"UnscaleGrads":      func() { tensor.UnscaleGrads([]*tensor.Tensor{a, b}, 2) },
			"StepGuard.Unscale": func() { guard.Unscale([]*tensor.Tensor{a, b}) },
			"ClipGradNorm":      func() { guard.ClipGradNorm([]*tensor.Tensor{a, b}, nil, 1e-3) },
			"AdamWStep g":       func() { tensor.AdamWStep(a, b, m, v, 1, 0.9, 0.999, 1e-8, 0, 1) },
			"AdamWStep m":       func() { tensor.AdamWStep(m, other(), a, b, 1, 0.9, 0.999, 1e-8, 0, 1) },
			"AdamWSteps": func() {
				tensor.AdamWSteps(a2, b2, []*tensor.Tensor{m, other()}, []*tensor.Tensor{v, other()}, wd, 1, 0.9, 0.999, 1e-8, 1)
			},
			"AdamWSteps p twice": func() {
				tensor.AdamWSteps([]*tensor.Tensor{a, a}, []*tensor.Tensor{m, m}, []*tensor.Tensor{other(), other()}, []*tensor.Tensor{other(), other()}, wd, 1, 0.9, 0.999, 1e-8, 1)
			},
			"AdamWStepsPipelined": func() {
				tensor.AdamWStepsPipelined(a2, b2, []*tensor.Tensor{m, other()}, []*tensor.Tensor{v, other()}, wd, 1, 0.9, 0.999, 1e-8, 1, []int{2}, 1, nil)
			},
			"SGDStep g":   func() { tensor.SGDStep(a, b, nil, 1, 0, 0, false) },
			"SGDStep buf": func() { tensor.SGDStep(a, other(), b, 1, 0.9, 0, false) },
		} {
			err := tensor.Try(fn)
			var oe *tensor.OpError
			require.ErrorAs(t, err, &oe, name)
			require.ErrorIs(t, err, tensor.ErrArgument, name)
			require.Equal(t, before, x.Float32s(), "%s wrote before refusing", name)
		}
		// Disjoint views of one storage are fine.
		tensor.ScaleAll([]*tensor.Tensor{x.Narrow(0, 0, 5), x.Narrow(0, 5, 5)}, 2)
		require.Equal(t, []float32{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}, x.Float32s())
	})
}
