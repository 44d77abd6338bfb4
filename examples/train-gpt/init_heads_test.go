package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestInitRefusesOtherHeads: -init of weights whose metadata config has
// other attention heads than the model is refused: the shapes match, so
// they loaded and trained as another model without a word (generate
// refuses the same file).
func TestInitRefusesOtherHeads(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	common := []string{"-steps", "1", "-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-loss-plot", "off", "-sample", "0"}
	o, err := parseFlags(append(common, "-out", w))
	require.NoError(t, err)
	require.NoError(t, run(o))
	two := filepath.Join(dir, "two-heads.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		ts, md, err := c.ReadSafetensors(w, tensor.CPU())
		require.NoError(t, err)
		cfg, err := nn.ParseGPTConfig(md["config"])
		require.NoError(t, err)
		require.Equal(t, 4, cfg.Heads, "tiny's")
		cfg.Heads = 2
		md["config"] = fmt.Sprintf("%+v", cfg)
		require.NoError(t, tensor.WriteSafetensors(two, ts, md))
	})
	o, err = parseFlags(append(common, "-out", "", "-init", two))
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "-init "+two+": the file's metadata has 2 attention heads, the model here (-config tiny) 4")
	require.ErrorIs(t, err, tensor.ErrShape)
	o, err = parseFlags(append(common, "-out", "", "-init", w))
	require.NoError(t, err)
	require.NoError(t, run(o), "the same heads load")
}
