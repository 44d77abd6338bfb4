package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// A target out of range found while the CPU kernel runs fails the op with
// ErrArgument (it was a plain string panic in the backward) and releases
// the outputs it had allocated.
func TestCrossEntropyBadTargetsLeakNothing(t *testing.T) {
	logits := tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 3)
	tg := tensor.FromInt32s(tensor.CPU(), []int32{5, 0}, 2)
	d := tensor.Ones(tensor.CPU(), tensor.Float32, 2)
	tensor.Keep(logits, tg, d)
	defer func() { logits.Release(); tg.Release(); d.Release() }()
	before := tensor.CPU().Memory().InUse()
	err := tensor.Try(func() { tensor.CrossEntropyBackward(logits, tg, d, -100) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "target of row 0 is 5")
	err = tensor.Try(func() { tensor.CrossEntropyFused(logits, -1, tg, d, -100, tensor.Float32) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "target of row 0 is 5")
	require.Equal(t, before, tensor.CPU().Memory().InUse())
}
