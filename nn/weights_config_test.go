package nn_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

func TestParseGPTConfig(t *testing.T) {
	for _, c := range nn.GPTConfigs {
		c.Dropout = 0.25
		got, err := nn.ParseGPTConfig(fmt.Sprintf("%+v", c)) // train-gpt's metadata
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	got, err := nn.ParseGPTConfig(`{"Vocab": 10, "Context": 4, "Layers": 1, "Heads": 2, "Width": 8}`)
	require.NoError(t, err)
	require.Equal(t, nn.GPTConfig{Vocab: 10, Context: 4, Layers: 1, Heads: 2, Width: 8}, got)
	for _, bad := range []string{"", "tiny", "{Vocab:x}", "{Vocab:10 Colour:3}", `{"Vocab": 10, "Colour": 1}`, "{Vocab:10 Context:4 Layers:1 Heads:3 Width:8}"} {
		_, err := nn.ParseGPTConfig(bad)
		require.Error(t, err, bad)
	}
}

func TestGPTConfigOfWeights(t *testing.T) {
	dir := t.TempDir()
	g := layoutGPT(t, layoutCfg, 1)
	meta := map[string]string{"config": fmt.Sprintf("%+v", layoutCfg)}
	withMeta := filepath.Join(dir, "meta.safetensors")
	require.NoError(t, nn.SaveWeights(withMeta, g.Parameters(), meta))
	cfg, fromMeta, err := nn.GPTConfigOfWeights(withMeta)
	require.NoError(t, err)
	require.True(t, fromMeta)
	require.Equal(t, layoutCfg, cfg)

	inferred := layoutCfg
	inferred.Heads = 0
	for _, l := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF} {
		path := filepath.Join(dir, l.String()+".safetensors")
		require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, g.Parameters(), nil, l))
		cfg, fromMeta, err := nn.GPTConfigOfWeights(path)
		require.NoError(t, err)
		require.False(t, fromMeta)
		require.Equal(t, inferred, cfg, "%v: the shapes say all but the heads", l)
	}

	other := filepath.Join(dir, "other.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		require.NoError(t, tensor.WriteSafetensors(other, map[string]*tensor.Tensor{"fc.weight": c.Zeros(tensor.CPU(), tensor.Float32, 2, 2)}, nil))
	})
	_, _, err = nn.GPTConfigOfWeights(other)
	require.ErrorContains(t, err, "not a GPT's weights")
	_, _, err = nn.GPTConfigOfWeights(filepath.Join(dir, "none"))
	require.Error(t, err)
}
