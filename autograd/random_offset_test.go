package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestRandomOffsetRefusesNegative: a negative count is an *tensor.OpError
// wrapping ErrArgument and leaves the stream where it was; it moved the
// stream back, so that the next masks repeated earlier ones. HeadPadding
// takes a nil device as the CPU (it dereferenced it).
func TestRandomOffsetRefusesNegative(t *testing.T) {
	c := tensor.NewCtx()
	first := autograd.RandomOffset(c, 10)
	at := autograd.RandomState(c)
	err := tensor.Try(func() { autograd.RandomOffset(c, -5) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "n = -5, want >= 0")
	require.Equal(t, at, autograd.RandomState(c), "the stream did not move")
	require.Equal(t, first+10, autograd.RandomOffset(c, 1))
	require.Equal(t, 50257, autograd.HeadPadding(nil, 50257))
}
