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
