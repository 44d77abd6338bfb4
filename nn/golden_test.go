package nn_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// relErr is ‖a − b‖ / ‖b‖.
func relErr(a, b []float64) float64 {
	var num, den float64
	for i := range a {
		num += (a[i] - b[i]) * (a[i] - b[i])
		den += b[i] * b[i]
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// goldenGPT builds the golden file's model on the CPU with its weights.
func goldenGPT(t *testing.T, path string, dt tensor.DType) (*nn.GPT, map[string]*tensor.Tensor) {
	return goldenGPTOn(t, path, dt, tensor.CPU())
}

// goldenGPTOn builds the golden file's model on dev with its weights (the
// file's tensors stay on the CPU).
func goldenGPTOn(t *testing.T, path string, dt tensor.DType, dev tensor.Device) (*nn.GPT, map[string]*tensor.Tensor) {
	ts, meta, err := tensor.ReadSafetensors(path, tensor.CPU())
	require.NoError(t, err)
	var cfg struct {
		V int `json:"vocab_size"`
		T int `json:"block_size"`
		L int `json:"n_layer"`
		H int `json:"n_head"`
		C int `json:"n_embd"`
	}
	require.NoError(t, json.Unmarshal([]byte(meta["config"]), &cfg))
	c := nn.GPTConfig{Vocab: cfg.V, Context: cfg.T, Layers: cfg.L, Heads: cfg.H, Width: cfg.C}
	g, err := nn.NewGPT(c, nn.Options{Device: dev, DType: dt, Rng: rand.New(rand.NewPCG(1, 1))})
	require.NoError(t, err)
	for _, p := range g.Parameters() {
		w, ok := ts[p.Name]
		require.True(t, ok, "golden file lacks %s", p.Name)
		p.Value.CopyFrom(w)
	}
	return g, ts
}

func TestGPTMatchesPyTorch(t *testing.T) {
	for _, tc := range []struct {
		file string
		dt   tensor.DType
		tol  float64
	}{
		{"golden_gpt.safetensors", tensor.Float32, 1e-4},
		{"golden_gpt64.safetensors", tensor.Float64, 1e-10},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			tensor.WithScope(func() {
				g, ts := goldenGPT(t, filepath.Join("testdata", tc.file), tc.dt)
				defer nn.Release(g.Parameters())
				idx, tgt := ts["idx"], ts["targets"]
				logits := g.Forward(idx)
				require.Less(t, relErr(logits.Value.Float64s(), ts["logits"].Float64s()), tc.tol, "logits")
				loss := nn.CrossEntropy(logits, tgt)
				want := ts["loss"].Item()
				got := loss.Item()
				require.Less(t, math.Abs(got-want)/want, tc.tol, "loss %v vs PyTorch %v", got, want)
				require.NoError(t, loss.Backward())
				for _, p := range g.Parameters() {
					require.NotNil(t, p.Grad, p.Name)
					e := relErr(p.Grad.Float64s(), ts["grad."+p.Name].Float64s())
					require.Less(t, e, tc.tol, "gradient of %s: relative error %.3g", p.Name, e)
				}
				// One AdamW step with nanoGPT's decay grouping, then the loss again.
				opt := nn.NewAdamW(g.Parameters(), 1e-3, 0.1)
				opt.Beta2 = 0.95
				defer opt.Release()
				require.NoError(t, opt.Step())
				nn.ZeroGrad(g.Parameters())
				byName, err := nn.ByName(g.Parameters())
				require.NoError(t, err)
				for name, w := range ts {
					if len(name) > 6 && name[:6] == "step1." {
						p := byName[name[6:]]
						require.NotNil(t, p, name)
						got, want := p.Value.Float64s(), w.Float64s()
						for i := range want {
							require.InDelta(t, want[i], got[i], 2e-6, "%s[%d]", name, i)
						}
					}
				}
				after := g.Loss(idx, tgt).Item()
				want = ts["loss_after_step"].Item()
				require.Less(t, math.Abs(after-want)/want, tc.tol, "loss after one step %v vs %v", after, want)
			})
		})
	}
}

func TestOptimizersMatchPyTorch(t *testing.T) {
	ts, meta, err := tensor.ReadSafetensors("../tensor/testdata/golden_ops.safetensors", tensor.CPU())
	require.NoError(t, err)
	defer func() {
		for _, v := range ts {
			v.Release()
		}
	}()
	var cases []string
	require.NoError(t, json.Unmarshal([]byte(meta["cases"]), &cases))
	ran := 0
	for _, name := range cases {
		var m struct {
			LR, WeightDecay, Momentum float64
			Betas                     []float64
			Eps                       float64
		}
		var raw map[string]any
		require.NoError(t, json.Unmarshal([]byte(meta[name]), &raw))
		if op := raw["op"]; op != "adamw" && op != "sgd" {
			continue
		}
		ran++
		m.LR = raw["lr"].(float64)
		m.WeightDecay = raw["weight_decay"].(float64)
		t.Run(name, func(t *testing.T) {
			tensor.WithScope(func() {
				p0 := ts[name+".p0"]
				p := &nn.Parameter{Var: autogradParam(p0.Clone()), Name: "p", Decay: true}
				var opt nn.Optimizer
				if strings.HasPrefix(name, "adam") {
					b := raw["betas"].([]any)
					a := nn.NewAdamW([]*nn.Parameter{p}, m.LR, m.WeightDecay)
					a.Beta1, a.Beta2, a.Eps = b[0].(float64), b[1].(float64), raw["eps"].(float64)
					opt = a
				} else {
					s := nn.NewSGD([]*nn.Parameter{p}, m.LR, raw["momentum"].(float64))
					s.WeightDecay = m.WeightDecay
					s.Nesterov = raw["nesterov"].(bool)
					opt = s
				}
				defer opt.Release()
				tol := 1e-6
				if p0.DType() == tensor.Float64 {
					tol = 1e-13
				}
				for step := 1; step <= 3; step++ {
					p.Grad = ts[name+".g"].Clone()
					tensor.Keep(p.Grad)
					require.NoError(t, opt.Step())
					p.ZeroGrad()
					want := ts[name+".p"+string(rune('0'+step))].Float64s()
					got := p.Value.Float64s()
					for i := range want {
						require.InDelta(t, want[i], got[i], tol*(1+math.Abs(want[i])), "step %d element %d", step, i)
					}
				}
				p.Value.Release()
			})
		})
	}
	require.Equal(t, 8, ran, "every optimizer case of the golden file ran")
}

func TestClipGradNormMatchesPyTorch(t *testing.T) {
	ts, _, err := tensor.ReadSafetensors("../tensor/testdata/golden_ops.safetensors", tensor.CPU())
	require.NoError(t, err)
	for _, name := range []string{"clip", "clip_noop"} {
		t.Run(name, func(t *testing.T) {
			var ps []*nn.Parameter
			for _, g := range []string{"g0", "g1"} {
				v := ts[name+"."+g]
				p := &nn.Parameter{Var: autogradParam(tensor.ZerosLike(v)), Name: g}
				p.Grad = v.Clone()
				tensor.Keep(p.Grad)
				ps = append(ps, p)
			}
			defer nn.Release(ps)
			maxNorm := 1.0
			if name == "clip_noop" {
				maxNorm = 100
			}
			n, err := nn.ClipGradNorm(ps, maxNorm)
			require.NoError(t, err)
			require.InDelta(t, ts[name+".total_norm"].Item(), n, 1e-12)
			for i, g := range []string{"g0", "g1"} {
				want, got := ts[name+"."+g+"_after"].Float64s(), ps[i].Grad.Float64s()
				for j := range want {
					require.InDelta(t, want[j], got[j], 1e-12)
				}
			}
		})
	}
	for _, v := range ts {
		v.Release()
	}
}
