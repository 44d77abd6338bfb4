package tensor_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestCausalSoftmaxIsMaskThenSoftmax checks the fused op against the
// unfused chain it replaces, on a batch of 4-D inputs with as many and
// with fewer queries than keys, and on a non-contiguous view.
func TestCausalSoftmaxIsMaskThenSoftmax(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	tensor.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			for _, shape := range [][]int{{2, 3, 7, 7}, {2, 3, 4, 9}, {1, 1, 1, 1}} {
				n := 1
				for _, d := range shape {
					n *= d
				}
				vals := make([]float64, 2*n)
				for i := range vals {
					vals[i] = 4 * rng.NormFloat64()
				}
				x := tensor.FromFloats(cpu, dt, vals[:n], shape...)
				dy := tensor.FromFloats(cpu, dt, vals[n:], shape...)
				y := tensor.CausalSoftmax(x)
				chain := tensor.Softmax(tensor.CausalMask(x, tensor.NegInf))
				requireAllClose(t, chain, y, 1e-6, "%v %v forward", dt, shape)
				requireAllClose(t, tensor.CausalMask(tensor.SoftmaxBackward(chain, dy, false), 0),
					tensor.CausalSoftmaxBackward(y, dy), 1e-6, "%v %v backward", dt, shape)
			}
		}
		// A transposed view is made contiguous first.
		x := tensor.FromFloat64s(cpu, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3)
		requireAllClose(t, tensor.CausalSoftmax(x.T().Contiguous()), tensor.CausalSoftmax(x.T()), 0, "view")
	})
}

func TestCausalSoftmaxErrors(t *testing.T) {
	tensor.WithScope(func() {
		err := tensor.Try(func() { tensor.CausalSoftmax(tensor.Zeros(cpu, tensor.Float32, 4, 3)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "4 query rows over 3 keys")
		err = tensor.Try(func() { tensor.CausalSoftmax(tensor.Zeros(cpu, tensor.Float32, 5)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		err = tensor.Try(func() { tensor.CausalSoftmax(tensor.Zeros(cpu, tensor.Int32, 2, 2)) })
		require.ErrorIs(t, err, tensor.ErrDType)
		y := tensor.Zeros(cpu, tensor.Float32, 2, 2)
		err = tensor.Try(func() { tensor.CausalSoftmaxBackward(y, tensor.Zeros(cpu, tensor.Float32, 2, 3)) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.Equal(t, []int{0, 4}, tensor.CausalSoftmax(tensor.Zeros(cpu, tensor.Float32, 0, 4)).Shape())
	})
}

// requireAllClose compares two tensors elementwise within tol relative
// to max(1, |want|).
func requireAllClose(t *testing.T, want, got *tensor.Tensor, tol float64, msg string, args ...any) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), append([]any{msg}, args...)...)
	w, g := want.Float64s(), got.Float64s()
	for i := range w {
		require.InDelta(t, w[i], g[i], tol*max(1, abs(w[i])), append([]any{msg + " [%d]"}, append(args, i)...)...)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestCausalSoftmaxNonFiniteRows pins what its doc says of rows whose
// kept scores hold +Inf or are all -Inf: NaN at the kept positions and 0
// at the masked ones, where the unfused chain (as PyTorch) is NaN
// throughout.
func TestCausalSoftmaxNonFiniteRows(t *testing.T) {
	inf := math.Inf(1)
	tensor.WithScope(func() {
		x := tensor.FromFloat64s(cpu, []float64{
			inf, 1, 5,
			-inf, -inf, 3,
			-inf, 2, 3,
		}, 3, 3)
		got := tensor.CausalSoftmax(x).Float64s()
		chain := tensor.Softmax(tensor.CausalMask(x, tensor.NegInf)).Float64s()
		for i, v := range got[:6] {
			if i == 0 || i == 3 || i == 4 {
				require.True(t, math.IsNaN(v), "kept %d: %v", i, v)
			} else {
				require.Zero(t, v, "masked %d", i)
			}
			require.True(t, math.IsNaN(chain[i]), "chain %d: %v", i, chain[i])
		}
		require.InDeltaSlice(t, []float64{0, 1 / (1 + math.E), math.E / (1 + math.E)}, got[6:], 1e-12)
		require.Equal(t, chain[6:], got[6:])
	})
}
