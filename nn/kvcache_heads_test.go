package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestDecoderHeadsOfTheLayer: the KV cache splits each block's heads as
// its attention layer does (CausalSelfAttention.Heads, what Forward
// uses), not as the config says: a model whose layers attend with other
// heads than Config.Heads decodes as its full forward computes (the cache
// used to be shaped by the config and refuse it), and a layer with no
// heads is an error, not a division by zero.
func TestDecoderHeadsOfTheLayer(t *testing.T) {
	g := genGPT(t, genCfg, 7)
	for _, b := range g.Blocks {
		b.Attn.Heads = 4 // the config says 2
	}
	seq := []int{3, 9, 1, 14, 27, 6}
	d, err := g.NewDecoder(tensor.NewCtx())
	require.NoError(t, err)
	defer d.Release()
	for i := range seq {
		logits, err := d.Feed(seq[i : i+1])
		require.NoError(t, err)
		requireClose(t, lastLogits(t, g, seq[:i+1]), logits, 1e-5, "4 heads")
	}
	got, err := g.Generate(nil, seq, nn.GenerateOptions{MaxNewTokens: 5})
	require.NoError(t, err)
	require.Equal(t, greedyByRecompute(t, g, seq, 5), got)

	for _, heads := range []int{0, 3} {
		g.Blocks[1].Attn.Heads = heads
		require.NotPanics(t, func() {
			_, err = g.Generate(nil, seq, nn.GenerateOptions{MaxNewTokens: 1})
		}, "%d heads", heads)
		require.ErrorContains(t, err, "block 1", "%d heads", heads)
		require.ErrorContains(t, err, "heads", "%d heads", heads)
	}
}
