package nn_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestReadWeightsInfo: one read of the header tells the metadata (as
// tensor.ReadSafetensorsMetadata reads it), whether the file is a
// training state (as IsTrainStateFile), and the GPT's shape (as
// GPTConfigOfWeights), for GPT.SaveWeights's weights, weights without a
// config and SaveTrainState's state.
func TestReadWeightsInfo(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	check := func(path string, trainState, fromMeta bool, cfg nn.GPTConfig) nn.WeightsInfo {
		t.Helper()
		info, err := nn.ReadWeightsInfo(path)
		require.NoError(t, err)
		meta, err := tensor.ReadSafetensorsMetadata(path)
		require.NoError(t, err)
		require.Equal(t, meta, info.Metadata)
		require.Equal(t, trainState, info.TrainState)
		require.Equal(t, nn.IsTrainStateFile(path), info.TrainState)
		got, gotFromMeta, err := info.Config()
		require.NoError(t, err)
		require.Equal(t, fromMeta, gotFromMeta)
		require.Equal(t, cfg, got)
		got, gotFromMeta, err = nn.GPTConfigOfWeights(path)
		require.NoError(t, err)
		require.Equal(t, fromMeta, gotFromMeta)
		require.Equal(t, cfg, got)
		return info
	}

	g := layoutGPT(t, layoutCfg, 1)
	w := filepath.Join(dir, "w.safetensors")
	require.NoError(t, g.SaveWeights(ctx, w, map[string]string{"producer": "test"}, nn.LayoutHF))
	info := check(w, false, true, layoutCfg)
	require.Equal(t, map[string]string{"producer": "test", "config": fmt.Sprintf("%+v", layoutCfg), "format": "pt"}, info.Metadata)

	bare := filepath.Join(dir, "bare.safetensors")
	require.NoError(t, nn.SaveWeights(bare, g.Parameters(), nil))
	noHeads := layoutCfg
	noHeads.Heads = 0
	info = check(bare, false, false, noHeads)
	require.Empty(t, info.Metadata)

	s := newStepper(t, layoutCfg, 1)
	s.steps(t, 1) // AdamW's moments exist after a step
	state := filepath.Join(dir, "s.safetensors")
	require.NoError(t, nn.SaveTrainState(ctx, state, s.g.Parameters(), s.opt, map[string]string{"config": fmt.Sprintf("%+v", layoutCfg)}))
	info = check(state, true, true, layoutCfg)
	require.Equal(t, "1", info.Metadata[nn.OptimizerStepKey])
}

// TestReadWeightsInfoRefuses: a missing file and files that are not
// safetensors are errors naming the file and what is wrong (and neither
// is a training state); a safetensors file of other tensors is read, and
// Config says it is not a GPT's.
func TestReadWeightsInfoRefuses(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.safetensors")
	_, err := nn.ReadWeightsInfo(missing)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, missing)
	require.False(t, nn.IsTrainStateFile(missing))

	text := []byte("hello, world: not weights\n")
	header := func(h string) []byte { return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...) }
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"short": {[]byte("hi"), "unexpected EOF"},
		"text":  {text, fmt.Sprintf("a header of %d bytes", binary.LittleEndian.Uint64(text))},
		"cut":   {header(`{"__metadata__": {}}`)[:12], "a header of 20 bytes in a file of 12"},
		"json":  {header(`{"a": [1, 2}`), "invalid character"},
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, c.data, 0o644))
		_, err := nn.ReadWeightsInfo(path)
		require.ErrorContains(t, err, "nn: "+path+": not a safetensors file: ", name)
		require.ErrorContains(t, err, c.want, name)
		require.False(t, nn.IsTrainStateFile(path), name)
		_, _, cerr := nn.GPTConfigOfWeights(path)
		require.Equal(t, err.Error(), cerr.Error(), name)
	}

	other := filepath.Join(dir, "other.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		require.NoError(t, tensor.WriteSafetensors(other, map[string]*tensor.Tensor{"fc.weight": c.Zeros(tensor.CPU(), tensor.Float32, 2, 2)}, map[string]string{"k": "v"}))
	})
	info, err := nn.ReadWeightsInfo(other)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k": "v"}, info.Metadata)
	require.False(t, info.TrainState)
	_, _, err = info.Config()
	require.EqualError(t, err, "nn: "+other+`: no "transformer.wte.weight" or "wte.weight": not a GPT's weights`)
}
