package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// TestDumpLogitsNotFinite: weights finite but so large that the forward
// overflows give logits JSON cannot hold; -dump-logits names the flag
// and the logit rather than json.Marshal's "unsupported value: NaN",
// and writes no file.
func TestDumpLogitsNotFinite(t *testing.T) {
	g, _ := testWeights(t, testCfg, true, nn.LayoutNanoGPT)
	for _, p := range g.Parameters() {
		p.Value.ScaleInPlace(1e18)
	}
	dir := t.TempDir()
	w := filepath.Join(dir, "huge.safetensors")
	require.NoError(t, nn.SaveWeightsLayout(t.Context(), w, g.Parameters(), map[string]string{"config": fmt.Sprintf("%+v", testCfg)}, nn.LayoutNanoGPT))
	dump := filepath.Join(dir, "l.json")
	_, _, err := runArgs(t, "-weights", w, "-prompt", "hi", "-dump-logits", dump)
	require.ErrorContains(t, err, "-dump-logits: logit 0 of token 0 (full forward) is NaN: the model's forward is not finite")
	_, err = os.Stat(dump)
	require.True(t, os.IsNotExist(err), "no file written: %v", err)
}
