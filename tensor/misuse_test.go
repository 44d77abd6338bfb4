package tensor_test

// Misuse of the public API that once went wrong silently or with a runtime
// panic instead of an *OpError or error naming the problem.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestStringElidesEachElementOnce: a long axis prints its first three and
// last three entries around "...", each once.
func TestStringElidesEachElementOnce(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, seq(10), 10)
		require.Equal(t, "Tensor(float64 [10] on cpu,\n[0, 1, 2, ..., 7, 8, 9])", x.String())
		m := tensor.FromFloat64s(cpu, seq(16), 8, 2)
		require.Equal(t, "Tensor(float64 [8 2] on cpu,\n[[0, 1],\n [2, 3],\n [4, 5],\n ...,\n [10, 11],\n [12, 13],\n [14, 15]])", m.String())
	})
}

// TestOptimizersRefuseStridedParameters: the optimizer steps update p in
// place as a contiguous block, so a strided view (a narrowed or
// transposed parameter) is refused with ErrShape, as a strided buffer
// is, instead of updating the wrong elements of its storage.
func TestOptimizersRefuseStridedParameters(t *testing.T) {
	tensor.WithScope(func() {
		w := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
		p := w.Narrow(1, 1, 2) // [[2, 3], [5, 6]], strides (3, 1)
		g := tensor.Ones(cpu, tensor.Float32, 2, 2)
		m, v := tensor.Zeros(cpu, tensor.Float32, 2, 2), tensor.Zeros(cpu, tensor.Float32, 2, 2)
		for name, step := range map[string]func(){
			"SGD":   func() { tensor.SGDStep(p, g, nil, 1, 0, 0, false) },
			"AdamW": func() { tensor.AdamWStep(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0, 1) },
			"AdamWSteps": func() {
				tensor.AdamWSteps([]*tensor.Tensor{p}, []*tensor.Tensor{g}, []*tensor.Tensor{m}, []*tensor.Tensor{v}, []float64{0}, 0.1, 0.9, 0.999, 1e-8, 1)
			},
		} {
			err := tensor.Try(step)
			require.ErrorIs(t, err, tensor.ErrShape, name)
			require.Equal(t, []float32{1, 2, 3, 4, 5, 6}, w.Float32s(), "%s changed the storage", name)
		}
	})
}

// TestScaleAllChecksBeforeScaling: a bad tensor late in the list panics
// before any earlier one is scaled (the half and float64 ones were scaled
// as the loop reached them).
func TestScaleAllChecksBeforeScaling(t *testing.T) {
	tensor.WithScope(func() {
		h := tensor.Full(tensor.CPU(), tensor.BFloat16, 2, 4)
		d := tensor.Full(tensor.CPU(), tensor.Float64, 2, 4)
		bad := tensor.Full(tensor.CPU(), tensor.Float32, 2, 4, 4).Transpose(0, 1)
		err := tensor.Try(func() { tensor.ScaleAll([]*tensor.Tensor{h, d, bad}, 3) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Equal(t, []float64{2, 2, 2, 2}, h.Float64s())
		require.Equal(t, []float64{2, 2, 2, 2}, d.Float64s())
	})
}
