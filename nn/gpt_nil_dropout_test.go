package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestGPTSetTrainingNilDropouts: a nil *Dropout is documented as no
// dropout (a Block or CausalSelfAttention written without one), and the
// forward pass takes it so; SetTraining must skip it too instead of
// dereferencing it, and still switch the dropouts that are there.
func TestGPTSetTrainingNilDropouts(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 2, Heads: 2, Width: 8, Dropout: 0.1}, nn.Options{Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	g.Drop = nil
	g.Blocks[0].Drop, g.Blocks[0].Attn.AttnDrop = nil, nil
	g.Blocks[1].Attn.ResidDrop = nil
	tensor.WithScope(func() {
		x := tensor.FromInt32s(tensor.CPU(), []int32{1, 2, 3, 4}, 1, 4)
		require.NoError(t, tensor.Try(func() { g.Forward(x) }), "nil dropouts are no dropout in the forward pass")
	})
	require.NotPanics(t, func() { g.SetTraining(false) })
	assert.False(t, g.Blocks[0].Attn.ResidDrop.Training)
	assert.False(t, g.Blocks[1].Drop.Training)
	require.NotPanics(t, func() { g.SetTraining(true) })
	assert.True(t, g.Blocks[1].Attn.AttnDrop.Training)
}
