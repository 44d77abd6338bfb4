package nn_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	st "github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

var layoutCfg = nn.GPTConfig{Vocab: 23, Context: 9, Layers: 2, Heads: 2, Width: 8}

// layoutGPT is a GPT of cfg with weights drawn from seed, released at the
// end of the test.
func layoutGPT(t testing.TB, cfg nn.GPTConfig, seed uint64) *nn.GPT {
	t.Helper()
	g, err := nn.NewGPT(cfg, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 3))})
	require.NoError(t, err)
	t.Cleanup(func() { nn.Release(g.Parameters()) })
	g.SetTraining(false)
	return g
}

// gptLogits is the model's logits (1, T, V) for ids, on the host.
func gptLogits(t *testing.T, g *nn.GPT, ids []int32) []float32 {
	t.Helper()
	var out []float32
	c := tensor.NewCtx()
	require.NoError(t, tensor.Try(func() {
		autograd.NoGradIn(c, func() {
			c.WithScope(func() {
				out = g.Forward(c.FromInt32s(tensor.CPU(), ids, 1, len(ids))).Value.Float32s()
			})
		})
	}))
	return out
}

var layoutIDs = []int32{3, 1, 4, 1, 5, 9, 2, 6, 5}

// hfTensors is what Hugging Face's GPT-2 holds for g, made here by hand:
// names without "transformer." (or with it, prefixed), the four
// projections transposed to Conv1D's (in, out) on the host, the
// attention's mask buffers, and the tied head; in dtype dt.
func hfTensors(t *testing.T, c *tensor.Ctx, g *nn.GPT, prefixed bool, dt tensor.DType) map[string]*tensor.Tensor {
	t.Helper()
	m := map[string]*tensor.Tensor{}
	conv := []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}
	for _, p := range g.Parameters() {
		name := strings.TrimPrefix(p.Name, "transformer.")
		if prefixed {
			name = p.Name
		}
		v, shape := p.Value.Float64s(), p.Value.Shape()
		for _, s := range conv {
			if strings.HasSuffix(name, s) {
				rows, cols := shape[0], shape[1]
				tr := make([]float64, len(v))
				for i := range rows {
					for j := range cols {
						tr[j*rows+i] = v[i*cols+j]
					}
				}
				v, shape = tr, []int{cols, rows}
			}
		}
		m[name] = c.FromFloats(tensor.CPU(), dt, v, shape...)
	}
	pre := ""
	if prefixed {
		pre = "transformer."
	}
	T := g.Config.Context
	mask := make([]float64, T*T)
	for i := range T {
		for j := range i + 1 {
			mask[i*T+j] = 1
		}
	}
	for i := range g.Config.Layers {
		m[pre+"h."+itoa(i)+".attn.bias"] = c.FromFloats(tensor.CPU(), tensor.Float32, mask, 1, 1, T, T)
		m[pre+"h."+itoa(i)+".attn.masked_bias"] = c.FromFloats(tensor.CPU(), tensor.Float32, []float64{-1e4})
	}
	m["lm_head.weight"] = c.FromFloats(tensor.CPU(), dt, g.Wte.Weight.Value.Float64s(), g.Wte.Weight.Value.Shape()...)
	return m
}

func itoa(i int) string { return string(rune('0' + i)) }

func writeHF(t *testing.T, path string, g *nn.GPT, prefixed bool, dt tensor.DType, edit func(c *tensor.Ctx, m map[string]*tensor.Tensor)) {
	t.Helper()
	c := tensor.NewCtx()
	c.WithScope(func() {
		m := hfTensors(t, c, g, prefixed, dt)
		if edit != nil {
			edit(c, m)
		}
		require.NoError(t, tensor.WriteSafetensors(path, m, map[string]string{"format": "pt"}))
	})
}

// roundTo rounds every parameter of g to dt and back, so that a file in
// dt holds g's weights exactly. The conversions are ops on kept tensors
// alone, orphans no scope of c owns: c adopts them.
func roundTo(g *nn.GPT, dt tensor.DType) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		for _, p := range g.Parameters() {
			p.Value.CopyFrom(c.Adopt(p.Value.To(dt)))
		}
	})
}

func TestLoadWeightsLayouts(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name     string
		dt       tensor.DType
		hf       bool
		prefixed bool
	}{
		{"nanogpt-f32", tensor.Float32, false, true},
		{"hf-f32", tensor.Float32, true, false},
		{"hf-prefixed-f32", tensor.Float32, true, true},
		{"hf-f16", tensor.Float16, true, false},
		{"hf-bf16", tensor.BFloat16, true, false},
		{"hf-f64", tensor.Float64, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := layoutGPT(t, layoutCfg, 1)
			roundTo(a, tc.dt)
			want := gptLogits(t, a, layoutIDs)
			path := filepath.Join(dir, tc.name+".safetensors")
			wantLayout := nn.LayoutNanoGPT
			if tc.hf {
				writeHF(t, path, a, tc.prefixed, tc.dt, nil)
				wantLayout = nn.LayoutHF
			} else {
				c := tensor.NewCtx()
				c.WithScope(func() {
					m := map[string]*tensor.Tensor{}
					for _, p := range a.Parameters() {
						m[p.Name] = c.Adopt(p.Value.To(tc.dt)) // an orphan: c's scope frees it
					}
					require.NoError(t, tensor.WriteSafetensors(path, m, nil))
				})
			}
			b := layoutGPT(t, layoutCfg, 2)
			require.NotEqual(t, want, gptLogits(t, b, layoutIDs))
			meta, got, err := nn.LoadWeightsLayout(path, b.Parameters(), nn.LayoutAuto)
			require.NoError(t, err)
			require.Equal(t, wantLayout, got)
			if tc.hf {
				require.Equal(t, "pt", meta["format"])
			}
			require.Equal(t, want, gptLogits(t, b, layoutIDs), "logits bit for bit")
			// LoadWeights is the same, and so is the layout named.
			c := layoutGPT(t, layoutCfg, 3)
			_, err = nn.LoadWeights(path, c.Parameters())
			require.NoError(t, err)
			require.Equal(t, want, gptLogits(t, c, layoutIDs))
			d := layoutGPT(t, layoutCfg, 4)
			_, _, err = nn.LoadWeightsLayout(path, d.Parameters(), wantLayout)
			require.NoError(t, err)
			require.Equal(t, want, gptLogits(t, d, layoutIDs))
		})
	}
}

func TestSaveWeightsLayoutHF(t *testing.T) {
	dir := t.TempDir()
	a := layoutGPT(t, layoutCfg, 1)
	want := gptLogits(t, a, layoutIDs)

	// Saved by strata in each layout, loaded back: the same logits.
	for _, l := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF} {
		path := filepath.Join(dir, l.String()+".safetensors")
		require.NoError(t, nn.SaveWeightsLayout(context.Background(), path, a.Parameters(), map[string]string{"k": "v"}, l))
		b := layoutGPT(t, layoutCfg, 2)
		meta, got, err := nn.LoadWeightsLayout(path, b.Parameters(), nn.LayoutAuto)
		require.NoError(t, err)
		require.Equal(t, l, got)
		require.Equal(t, "v", meta["k"])
		require.Equal(t, want, gptLogits(t, b, layoutIDs))
	}
	var hfMeta map[string]string
	var err error
	tensor.WithScope(func() { // only the metadata is wanted: the scope frees the tensors read
		_, hfMeta, err = tensor.ReadSafetensors(filepath.Join(dir, "hf.safetensors"), tensor.CPU())
	})
	require.NoError(t, err)
	require.Equal(t, "pt", hfMeta["format"], "transformers' from_pretrained wants format pt")

	// Hugging Face's file (made by hand) -> load -> save in layout hf:
	// the same tensors under the same names, bit for bit (the mask buffers
	// and the tied head are not parameters and are not written).
	src := filepath.Join(dir, "src.safetensors")
	writeHF(t, src, a, false, tensor.Float32, nil)
	b := layoutGPT(t, layoutCfg, 2)
	_, err = nn.LoadWeights(src, b.Parameters())
	require.NoError(t, err)
	out := filepath.Join(dir, "out.safetensors")
	require.NoError(t, nn.SaveWeightsLayout(context.Background(), out, b.Parameters(), nil, nn.LayoutHF))
	c := tensor.NewCtx()
	c.WithScope(func() {
		ts, _, err := c.ReadSafetensors(src, tensor.CPU())
		require.NoError(t, err)
		got, _, err := c.ReadSafetensors(out, tensor.CPU())
		require.NoError(t, err)
		for name := range ts {
			if strings.HasSuffix(name, ".attn.bias") || strings.HasSuffix(name, ".attn.masked_bias") || name == "lm_head.weight" {
				delete(ts, name)
			}
		}
		require.Equal(t, slices.Sorted(maps.Keys(ts)), slices.Sorted(maps.Keys(got)))
		for name, x := range ts {
			require.Equal(t, x.Shape(), got[name].Shape(), name)
			require.Equal(t, x.RawBytes(), got[name].RawBytes(), name)
		}
	})

	require.ErrorContains(t, nn.SaveWeightsLayout(context.Background(), out, b.Parameters(), nil, nn.Layout(7)), "want auto, nanogpt or hf")
}

// TestLoadWeightsBoolMaskBuffer: a Hugging Face checkpoint whose mask
// buffers are bool (transformers 4.x) loads; the buffers are skipped
// whatever their dtype.
func TestLoadWeightsBoolMaskBuffer(t *testing.T) {
	a := layoutGPT(t, layoutCfg, 1)
	want := gptLogits(t, a, layoutIDs)
	views := map[string]st.TensorView{}
	c := tensor.NewCtx()
	c.WithScope(func() {
		for name, x := range hfTensors(t, c, a, false, tensor.Float32) {
			if strings.HasSuffix(name, ".attn.bias") {
				T := uint64(layoutCfg.Context)
				v, err := st.NewTensorView(st.BOOL, []uint64{1, 1, T, T}, make([]byte, T*T))
				require.NoError(t, err)
				views[name] = v
				continue
			}
			shape := make([]uint64, x.Rank())
			for i, d := range x.Shape() {
				shape[i] = uint64(d)
			}
			v, err := st.NewTensorView(st.F32, shape, x.RawBytes())
			require.NoError(t, err)
			views[name] = v
		}
	})
	buf, err := st.Serialize(views, nil)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "bool.safetensors")
	require.NoError(t, os.WriteFile(path, buf, 0o644))
	b := layoutGPT(t, layoutCfg, 2)
	_, err = nn.LoadWeights(path, b.Parameters())
	require.NoError(t, err)
	require.Equal(t, want, gptLogits(t, b, layoutIDs))
}

func TestLoadWeightsLayoutErrors(t *testing.T) {
	dir := t.TempDir()
	a := layoutGPT(t, layoutCfg, 1)
	b := layoutGPT(t, layoutCfg, 2)
	before := gptLogits(t, b, layoutIDs)
	load := func(edit func(c *tensor.Ctx, m map[string]*tensor.Tensor)) error {
		path := filepath.Join(dir, "e.safetensors")
		writeHF(t, path, a, false, tensor.Float32, edit)
		_, err := nn.LoadWeights(path, b.Parameters())
		return err
	}
	transpose := func(c *tensor.Ctx, m map[string]*tensor.Tensor, name string) {
		x := m[name]
		m[name] = x.T().Contiguous()
	}
	for _, tc := range []struct {
		name string
		edit func(c *tensor.Ctx, m map[string]*tensor.Tensor)
		want []string
	}{
		{"missing", func(c *tensor.Ctx, m map[string]*tensor.Tensor) { delete(m, "h.1.ln_2.bias") },
			[]string{"(hf layout)", "missing [h.1.ln_2.bias]", "unexpected []"}},
		{"unexpected", func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
			m["h.0.extra"] = c.Zeros(tensor.CPU(), tensor.Float32, 2)
		},
			[]string{"missing []", "unexpected [h.0.extra]"}},
		{"shape", func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
			m["h.0.mlp.c_fc.weight"] = c.Zeros(tensor.CPU(), tensor.Float32, 8, 16)
		}, []string{`"h.0.mlp.c_fc.weight" has shape [8 16] in the file, the model wants [8 32]`, "Conv1D (in, out) of the model's [32 8]"}},
		{"mixed", func(c *tensor.Ctx, m map[string]*tensor.Tensor) { transpose(c, m, "h.1.attn.c_attn.weight") },
			[]string{"cannot tell the layout", "nn.Linear", "Conv1D"}},
		{"prefixes", func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
			m["transformer.wpe.weight"] = m["wpe.weight"]
			delete(m, "wpe.weight")
		}, []string{"cannot tell the layout", "transformer.wpe.weight"}},
		{"untied head", func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
			m["lm_head.weight"] = c.Zeros(tensor.CPU(), tensor.Float32, layoutCfg.Vocab, layoutCfg.Width)
		}, []string{`"lm_head.weight" differs from "wte.weight"`}},
		{"int weight", func(c *tensor.Ctx, m map[string]*tensor.Tensor) {
			m["ln_f.bias"] = c.FromInt32s(tensor.CPU(), make([]int32, layoutCfg.Width))
		}, []string{`"ln_f.bias": dtype I32: want a float`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := load(tc.edit)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.Equal(t, before, gptLogits(t, b, layoutIDs), "a refused file changes nothing")
		})
	}

	// Hugging Face's names with nn.Linear's shapes: not a known layout.
	path := filepath.Join(dir, "names.safetensors")
	c := tensor.NewCtx()
	c.WithScope(func() {
		m := map[string]*tensor.Tensor{}
		for _, p := range a.Parameters() {
			m[strings.TrimPrefix(p.Name, "transformer.")] = p.Value
		}
		require.NoError(t, tensor.WriteSafetensors(path, m, nil))
	})
	_, err := nn.LoadWeights(path, b.Parameters())
	require.ErrorContains(t, err, "names without \"transformer.\" are Hugging Face's")

	// A nanoGPT file forced as hf, and an hf file forced as nanogpt.
	nano := filepath.Join(dir, "nano.safetensors")
	require.NoError(t, nn.SaveWeights(nano, a.Parameters(), nil))
	_, _, err = nn.LoadWeightsLayout(nano, b.Parameters(), nn.LayoutHF)
	require.ErrorContains(t, err, "the model wants [8 24]")
	hf := filepath.Join(dir, "hf.safetensors")
	writeHF(t, hf, a, false, tensor.Float32, nil)
	_, _, err = nn.LoadWeightsLayout(hf, b.Parameters(), nn.LayoutNanoGPT)
	require.ErrorContains(t, err, "missing [transformer.h.0.attn.c_attn.bias")

	// Not a safetensors file; no file.
	junk := filepath.Join(dir, "junk")
	require.NoError(t, os.WriteFile(junk, []byte("hello world, not a header"), 0o644))
	_, err = nn.LoadWeights(junk, b.Parameters())
	require.ErrorContains(t, err, "not a safetensors file")
	_, err = nn.LoadWeights(filepath.Join(dir, "none"), b.Parameters())
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, before, gptLogits(t, b, layoutIDs))
}

func TestParseLayout(t *testing.T) {
	for _, l := range []nn.Layout{nn.LayoutAuto, nn.LayoutNanoGPT, nn.LayoutHF} {
		got, err := nn.ParseLayout(l.String())
		require.NoError(t, err)
		require.Equal(t, l, got)
	}
	_, err := nn.ParseLayout("keras")
	require.ErrorContains(t, err, "want auto, nanogpt or hf")
}
