package nn_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// editHeader writes to a new file the safetensors file src with its
// header's entry for tensor name changed by edit (the data as it was).
func editHeader(t *testing.T, src, name string, edit func(e map[string]any)) string {
	path := filepath.Join(t.TempDir(), "edited.safetensors")
	testfs.EditSafetensorsEntry(t, src, path, name, edit)
	return path
}

// The header's shapes are checked against the bytes each tensor's
// data_offsets give it (its dtype's size times its elements) and those
// offsets against the file's data, before a caller sizes a model from the
// shapes: a small file whose position table claims 100,000,000 rows is
// refused from its header, naming the tensor, instead of a model of 47
// GiB being made for the load to find the file short (generate did).
func TestReadWeightsInfoChecksShapesAgainstData(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	good := filepath.Join(t.TempDir(), "gpt.safetensors")
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), good, g.Parameters(), nil, nn.LayoutNanoGPT))
	nn.Release(g.Parameters())
	info, err := nn.ReadWeightsInfo(good)
	require.NoError(t, err)
	got, _, err := info.Config()
	require.NoError(t, err)
	require.Equal(t, 8, got.Context)

	var wpe []any // wpe's data_offsets in the good file
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	var h map[string]map[string]any
	require.NoError(t, json.Unmarshal(b[8:8+binary.LittleEndian.Uint64(b[:8])], &h))
	name := "wpe.weight"
	if _, ok := h[name]; !ok {
		name = "transformer.wpe.weight" // the layout's name for it
	}
	wpe = h[name]["data_offsets"].([]any)
	begin, end := int64(wpe[0].(float64)), int64(wpe[1].(float64))
	require.Equal(t, int64(8*8*4), end-begin)
	data := int64(len(b)) - 8 - int64(binary.LittleEndian.Uint64(b[:8]))

	for _, c := range []struct {
		name string
		edit func(e map[string]any)
		want string
	}{
		{"shape", func(e map[string]any) { e["shape"] = []int{100000000, 8} },
			fmt.Sprintf(`shape [100000000 8] needs 3200000000 bytes, its data has %d`, end-begin)},
		{"dtype", func(e map[string]any) { e["dtype"] = "F64" },
			fmt.Sprintf(`shape [8 8] needs 512 bytes, its data has %d`, end-begin)},
		{"past the end", func(e map[string]any) { e["data_offsets"] = []int64{data, data + end - begin} },
			fmt.Sprintf(`data_offsets [%d %d]: past the end of the file's %d bytes of data`, data, data+end-begin, data)},
		{"begin after end", func(e map[string]any) { e["data_offsets"] = []int64{end, begin} },
			fmt.Sprintf(`data_offsets [%d %d]: want 0 <= begin <= end`, end, begin)},
		{"one offset", func(e map[string]any) { e["data_offsets"] = []int64{begin} },
			fmt.Sprintf(`data_offsets [%d]: want [begin, end]`, begin)},
		{"negative dimension", func(e map[string]any) { e["shape"] = []int{-8, -8} },
			`shape [-8 -8]: a dimension below 0`},
		{"overflow", func(e map[string]any) { e["shape"] = []int64{1 << 40, 1 << 40} },
			`shape [1099511627776 1099511627776] needs more bytes than an int64 counts`},
	} {
		path := editHeader(t, good, name, c.edit)
		want := fmt.Sprintf("tensor %q: %s", name, c.want)
		_, err := nn.ReadWeightsInfo(path)
		require.ErrorContains(t, err, "nn: "+path+": not a safetensors file: "+want, c.name)
		_, _, err = nn.GPTConfigOfWeights(path)
		require.ErrorContains(t, err, want, c.name)
	}
}
