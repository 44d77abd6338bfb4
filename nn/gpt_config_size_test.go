package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestGPTConfigParameterCountMustFit: a config whose parameter count does
// not fit in an int is refused by Validate (and so by ParseGPTConfig and
// NewGPT), naming it: Validate accepted it, NumParams wrapped (a
// vocabulary of math.MaxInt gave 264 parameters) and NewGPT of
// math.MaxInt layers built blocks until memory ran out. gpt2's count is
// the known 124,439,808 (the head tied to the token embedding).
func TestGPTConfigParameterCountMustFit(t *testing.T) {
	small := nn.GPTConfig{Vocab: 256, Context: 64, Layers: 2, Heads: 4, Width: 128}
	require.NoError(t, small.Validate())
	for name, c := range map[string]nn.GPTConfig{
		"vocab":   {Vocab: math.MaxInt, Context: 64, Layers: 2, Heads: 4, Width: 8},
		"layers":  {Vocab: 256, Context: 64, Layers: math.MaxInt, Heads: 1, Width: 1},
		"width":   {Vocab: 256, Context: 64, Layers: 1, Heads: 1, Width: 1 << 31},
		"context": {Vocab: 256, Context: 1 << 62, Layers: 1, Heads: 1, Width: 4},
	} {
		err := c.Validate()
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		require.ErrorContains(t, err, "its parameter count does not fit in an int", name)
		_, err = nn.NewGPT(c, nn.Options{})
		require.ErrorIs(t, err, tensor.ErrArgument, name)
	}
	_, err := nn.ParseGPTConfig(`{"Vocab": 4611686018427387904, "Context": 4611686018427387904, "Layers": 4611686018427387904, "Heads": 1, "Width": 4611686018427387904}`)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "its parameter count does not fit in an int")
	gpt2, err := nn.LookupGPTConfig("gpt2")
	require.NoError(t, err)
	require.Equal(t, 124439808, gpt2.NumParams())
}
