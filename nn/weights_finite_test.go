package nn_test

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadWeightsRefusesNonFinite: a float tensor holding a NaN or an
// infinity, in any float dtype, is refused at load naming it, wrapping
// tensor.ErrArgument, and no parameter changes (such weights used to load
// and fail at the first step, blaming the data or the learning rate).
func TestLoadWeightsRefusesNonFinite(t *testing.T) {
	g := layoutGPT(t, layoutCfg, 1)
	dst := layoutGPT(t, layoutCfg, 2)
	before := dst.Wte.Weight.Value.Float32s()
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32, tensor.Float16, tensor.BFloat16} {
		for _, tc := range []struct {
			v    float64
			want string
		}{{math.NaN(), "NaN"}, {math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"}} {
			path := filepath.Join(t.TempDir(), "w.safetensors")
			writeHF(t, path, g, true, dt, func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
				w := m["transformer.h.1.mlp.c_fc.weight"]
				v := w.Float64s()
				v[5] = tc.v
				m["transformer.h.1.mlp.c_fc.weight"] = c.FromFloats(tensor.CPU(), dt, v, w.Shape()...)
			})
			_, err := nn.LoadWeights(path, dst.Parameters())
			require.ErrorIs(t, err, tensor.ErrArgument, "%v %v", dt, tc.v)
			require.ErrorContains(t, err, `"transformer.h.1.mlp.c_fc.weight": element 5 of [8 32] is `+tc.want+": the weights are not finite", "%v", dt)
			require.Equal(t, before, dst.Wte.Weight.Value.Float32s(), "a refused file changes no parameter")
		}
	}
	path := filepath.Join(t.TempDir(), "w.safetensors")
	writeHF(t, path, g, true, tensor.Float32, nil)
	_, err := nn.LoadWeights(path, dst.Parameters())
	require.NoError(t, err, "large finite values and subnormals load")
}

// The check costs a small part of a load: a GPT of 14 M parameters.
func TestLoadWeightsFiniteCheckCost(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 56 MB file")
	}
	g := layoutGPT(t, nn.GPTConfig{Vocab: 8192, Context: 256, Layers: 6, Heads: 6, Width: 384}, 1)
	path := filepath.Join(t.TempDir(), "w.safetensors")
	require.NoError(t, nn.SaveWeights(path, g.Parameters(), nil))
	start := time.Now()
	_, err := nn.LoadWeights(path, g.Parameters())
	require.NoError(t, err)
	load := time.Since(start)
	check := nn.TimeFiniteCheck(t, path)
	t.Logf("load %v, of which the finite check %v", load, check)
	require.Less(t, check, load/4+10*time.Millisecond)
}
