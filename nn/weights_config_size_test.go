package nn_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestWeightsConfigNoLargerThanTheFile: the config a file's header gives
// is what a program builds the model from before loading it, so it must
// not describe more weights than the file holds. A metadata config whose
// file has no position table (nothing for checkConfigShapes to compare
// the context with), or a block number that a tensor of no elements
// claims (a 1 KB file made the shapes say a million layers), gave a model
// of the header's size, built in full (gigabytes, or a fatal out of
// memory) before the load found the tensors missing.
func TestWeightsConfigNoLargerThanTheFile(t *testing.T) {
	g := layoutGPT(t, layoutCfg, 1)
	dir := t.TempDir()
	write := func(name string, edit func(ts map[string]*tensor.Tensor), meta map[string]string) string {
		path := filepath.Join(dir, name)
		tensor.WithScope(func() {
			ts := map[string]*tensor.Tensor{}
			for _, p := range g.Parameters() {
				ts[p.Name] = p.Value
			}
			edit(ts)
			require.NoError(t, tensor.WriteSafetensors(path, ts, meta))
		})
		return path
	}
	huge := layoutCfg
	huge.Context = 1_000_000_000
	noWPE := write("nowpe.safetensors", func(ts map[string]*tensor.Tensor) {
		ts["transformer.wpe_renamed.weight"] = ts["transformer.wpe.weight"]
		delete(ts, "transformer.wpe.weight")
	}, map[string]string{"config": fmt.Sprintf("%+v", huge)})
	fakeBlock := func(ts map[string]*tensor.Tensor) {
		ts["transformer.h.999999.attn.bias"] = tensor.Zeros(tensor.CPU(), tensor.Float32, 0)
	}
	manyLayers := layoutCfg
	manyLayers.Layers = 1_000_000
	for _, c := range []struct{ name, path string }{
		{"metadata config, no position table", noWPE},
		{"a block number of no tensor", write("block.safetensors", fakeBlock, nil)},
		{"metadata config and block number", write("blockmeta.safetensors", fakeBlock, map[string]string{"config": fmt.Sprintf("%+v", manyLayers)})},
	} {
		cfg, _, err := nn.GPTConfigOfWeights(c.path)
		assert.ErrorIs(t, err, tensor.ErrShape, "%s: %+v", c.name, cfg)
	}
	// The file of the model itself, with and without its config.
	for _, meta := range []map[string]string{nil, {"config": fmt.Sprintf("%+v", layoutCfg)}} {
		path := write("good.safetensors", func(map[string]*tensor.Tensor) {}, meta)
		cfg, _, err := nn.GPTConfigOfWeights(path)
		require.NoError(t, err)
		require.Equal(t, layoutCfg.Layers, cfg.Layers)
	}
}
