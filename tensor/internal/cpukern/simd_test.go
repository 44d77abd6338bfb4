package cpukern

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScalarPaths runs the kernels that have vector loops with those
// switched off, so machines with AVX2 also test the code that machines
// without it (and every block the vector loops leave to Go) run.
func TestScalarPaths(t *testing.T) {
	old := setSIMD(false)
	defer setSIMD(old)
	require.False(t, hasSIMD)
	t.Run("unary", testUnary[float32])
	t.Run("unary-backward", testUnaryBackward[float32])
	t.Run("softmax", testSoftmax[float32])
	t.Run("cross-entropy", testCrossEntropy[float32])
	t.Run("exp", TestExp32Accuracy)
	t.Run("gelu", TestSigmoidGelu32Accuracy)
	t.Run("binary", testBinary[float32])
	t.Run("scale", testScale[float32])
}

// geluBackwardBothLoops returns GeluBackward's dx for x and dy of 0.75
// everywhere, from the vector loop (where there is one) and from the
// scalar loop.
func geluBackwardBothLoops(x []float32) (dy, vec, scalar []float32) {
	dy = make([]float32, len(x))
	for i := range dy {
		dy[i] = 0.75
	}
	vec = make([]float32, len(x))
	GeluBackward(vec, x, dy)
	old := setSIMD(false)
	defer setSIMD(old)
	scalar = make([]float32, len(x))
	GeluBackward(scalar, x, dy)
	return dy, vec, scalar
}

// TestGeluBackwardLargeInputs: for large positive x, s = 1 and s(1-s) is
// 0, so dx = dy, as the scalar loop and PyTorch give it until x^2
// overflows (about 1.8e19). The vector loop must give the same, not
// 0 x (2x du) = NaN once 2x du overflows (x above about 1.2e13).
func TestGeluBackwardLargeInputs(t *testing.T) {
	x := []float32{1e13, 3e13, 1e15, 1e17, 1e18, 5e18, 1.5e19, 2, 1e13, 3e13, 1e15, 1e17, 1e18, 5e18, 1.5e19, 2}
	dy, vec, scalar := geluBackwardBothLoops(x)
	for i, v := range x {
		if v == 2 {
			require.InEpsilon(t, scalar[i], vec[i], 1e-6, "gelu'(2)")
			continue
		}
		require.Equal(t, dy[i], scalar[i], "scalar gelu'(%g) * dy", v)
		require.Equal(t, dy[i], vec[i], "vector gelu'(%g) * dy", v)
	}
}

// TestGeluBackwardHugeInputsAgree: once x^2 overflows (|x| above about
// 1.8e19) du is infinite and s(1-s) du is 0 x inf = NaN, in geluGrad32,
// in the vector loop and in PyTorch. The scalar loop formed 3 geluC x x
// as (3 geluC x) x, which overflows only above about 5e19, so between the
// two it gave dy (or 0) where the vector loop, for a value that happened
// to sit in a block of eight, gave NaN.
func TestGeluBackwardHugeInputsAgree(t *testing.T) {
	// A block of eight the vector loop takes, then a tail it leaves to Go.
	x := []float32{2e19, 3e19, 4.5e19, 2e19, 3e19, 4.5e19, 2, 1, 2e19, 3e19, 4.5e19, -2e19, -3e19, -4.5e19}
	dy, vec, scalar := geluBackwardBothLoops(x)
	for i, v := range x {
		want := dy[i] * geluGrad32(v)
		if want != want {
			require.True(t, scalar[i] != scalar[i], "scalar gelu'(%g) * dy = %v, want NaN", v, scalar[i])
			require.True(t, vec[i] != vec[i], "vector gelu'(%g) * dy = %v, want NaN", v, vec[i])
			continue
		}
		require.InEpsilon(t, want, scalar[i], 1e-6, "scalar gelu'(%g) * dy", v)
		require.InEpsilon(t, want, vec[i], 1e-6, "vector gelu'(%g) * dy", v)
	}
}
