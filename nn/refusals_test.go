package nn_test

// Defects a new user's review found: bad hyperparameters, nil arguments,
// empty parameter lists, a corrupt training state, half-precision
// parameters, an empty batch and a leak, each once accepted silently or
// met with a runtime panic.

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// linearWithGrad is a 1x2 Linear whose weight has a gradient of ones.
func linearWithGrad(t *testing.T) *nn.Linear {
	t.Helper()
	l := nn.Must(nn.NewLinear(nn.Options{}, "l", 2, 1, true, 0.02))
	for _, p := range l.Parameters() {
		g, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleGradient, p.Value.Shape()...)
		require.NoError(t, err)
		g.Fill(1)
		p.Grad = g
	}
	return l
}

// TestOptimizerHyperparametersRefused: a learning rate, weight decay,
// beta, eps or momentum PyTorch's optimizers refuse with ValueError (and
// the infinities, which only make NaN weights) is an error wrapping
// tensor.ErrArgument that names the argument and its value, whether given
// to the constructor, set with SetLR or written into the field; the
// weights stay as they were.
func TestOptimizerHyperparametersRefused(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	type tc struct {
		name, want string
		mk         func(ps []*nn.Parameter) nn.Optimizer
	}
	adam := func(f func(o *nn.AdamW)) func(ps []*nn.Parameter) nn.Optimizer {
		return func(ps []*nn.Parameter) nn.Optimizer { o := nn.NewAdamW(ps, 1e-3, 0.1); f(o); return o }
	}
	sgd := func(f func(o *nn.SGD)) func(ps []*nn.Parameter) nn.Optimizer {
		return func(ps []*nn.Parameter) nn.Optimizer { o := nn.NewSGD(ps, 1e-3, 0.9); f(o); return o }
	}
	cases := []tc{
		{"AdamW lr NaN", "lr = NaN", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, nan, 0) }},
		{"AdamW lr -1", "lr = -1", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, -1, 0) }},
		{"AdamW SetLR +Inf", "lr = +Inf", adam(func(o *nn.AdamW) { o.SetLR(inf) })},
		{"AdamW SetLR NaN", "lr = NaN", adam(func(o *nn.AdamW) { o.SetLR(nan) })},
		{"AdamW SetLR -0.1", "lr = -0.1", adam(func(o *nn.AdamW) { o.SetLR(-0.1) })},
		{"AdamW wd NaN", "weight_decay = NaN", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, 1e-3, nan) }},
		{"AdamW wd +Inf", "weight_decay = +Inf", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, 1e-3, inf) }},
		{"AdamW wd -Inf", "weight_decay = -Inf", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, 1e-3, -inf) }},
		{"AdamW wd -0.1", "weight_decay = -0.1", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewAdamW(ps, 1e-3, -0.1) }},
		{"AdamW beta1 1", "beta1 = 1", adam(func(o *nn.AdamW) { o.Beta1 = 1 })},
		{"AdamW beta1 -0.1", "beta1 = -0.1", adam(func(o *nn.AdamW) { o.Beta1 = -0.1 })},
		{"AdamW beta2 NaN", "beta2 = NaN", adam(func(o *nn.AdamW) { o.Beta2 = nan })},
		{"AdamW beta2 1.5", "beta2 = 1.5", adam(func(o *nn.AdamW) { o.Beta2 = 1.5 })},
		{"AdamW eps NaN", "eps = NaN", adam(func(o *nn.AdamW) { o.Eps = nan })},
		{"AdamW eps +Inf", "eps = +Inf", adam(func(o *nn.AdamW) { o.Eps = inf })},
		{"AdamW eps -1e-8", "eps = -1e-08", adam(func(o *nn.AdamW) { o.Eps = -1e-8 })},
		{"SGD lr NaN", "lr = NaN", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewSGD(ps, nan, 0) }},
		{"SGD lr -1", "lr = -1", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewSGD(ps, -1, 0) }},
		{"SGD SetLR +Inf", "lr = +Inf", sgd(func(o *nn.SGD) { o.SetLR(inf) })},
		{"SGD momentum NaN", "momentum = NaN", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewSGD(ps, 1e-3, nan) }},
		{"SGD momentum -0.5", "momentum = -0.5", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewSGD(ps, 1e-3, -0.5) }},
		{"SGD momentum +Inf", "momentum = +Inf", func(ps []*nn.Parameter) nn.Optimizer { return nn.NewSGD(ps, 1e-3, inf) }},
		{"SGD wd NaN", "weight_decay = NaN", sgd(func(o *nn.SGD) { o.WeightDecay = nan })},
		{"SGD wd -1", "weight_decay = -1", sgd(func(o *nn.SGD) { o.WeightDecay = -1 })},
	}
	for _, c := range cases {
		l := linearWithGrad(t)
		before := l.Weight.Value.Float32s()
		opt := c.mk(l.Parameters())
		var err error
		require.NotPanics(t, func() { err = opt.Step() }, c.name)
		require.ErrorIs(t, err, tensor.ErrArgument, c.name)
		require.Contains(t, err.Error(), c.want, c.name)
		require.Equal(t, before, l.Weight.Value.Float32s(), c.name)
		opt.Release()
		nn.Release(l.Parameters())
	}
	// The edges PyTorch accepts still step: lr 0, beta 0, eps 0, weight
	// decay 0, momentum 0.
	for name, mk := range map[string]func(ps []*nn.Parameter) nn.Optimizer{
		"AdamW edges": adam(func(o *nn.AdamW) { o.SetLR(0); o.Beta1, o.Beta2, o.Eps, o.WeightDecay = 0, 0, 0, 0 }),
		"SGD edges":   sgd(func(o *nn.SGD) { o.SetLR(0); o.Momentum, o.WeightDecay = 0, 0 }),
	} {
		l := linearWithGrad(t)
		opt := mk(l.Parameters())
		require.NoError(t, opt.Step(), name)
		opt.Release()
		nn.Release(l.Parameters())
	}
}

// TestClipGradNormRefusesNegativeMaxNorm: a negative max norm flipped the
// sign of every gradient (the scale maxNorm/norm is below 1) and a NaN one
// was ignored; both are errors wrapping tensor.ErrArgument now, with the
// gradients unchanged. As in PyTorch, +Inf never clips (the norm is still
// returned) and 0 zeroes the gradients.
func TestClipGradNormRefusesNegativeMaxNorm(t *testing.T) {
	l := linearWithGrad(t)
	defer nn.Release(l.Parameters())
	ps := l.Parameters()
	for _, m := range []float64{-1, math.NaN(), math.Inf(-1)} {
		var err error
		require.NotPanics(t, func() { _, err = nn.ClipGradNorm(ps, m) })
		require.ErrorIs(t, err, tensor.ErrArgument, "max norm %v", m)
		require.Contains(t, err.Error(), "max norm", "max norm %v", m)
		require.Equal(t, []float32{1, 1}, l.Weight.Grad.Float32s(), "max norm %v", m)
	}
	n, err := nn.ClipGradNorm(ps, math.Inf(1))
	require.NoError(t, err)
	require.InDelta(t, math.Sqrt(3), n, 1e-6)
	require.Equal(t, []float32{1, 1}, l.Weight.Grad.Float32s())
	n, err = nn.ClipGradNorm(ps, 0)
	require.NoError(t, err)
	require.InDelta(t, math.Sqrt(3), n, 1e-6)
	require.Equal(t, []float32{0, 0}, l.Weight.Grad.Float32s())
}

// TestClipGradNormNaNGradient: a NaN gradient makes the norm NaN, which
// is returned with every gradient left as it was (PyTorch multiplies them
// all by NaN), even at max norm 0.
func TestClipGradNormNaNGradient(t *testing.T) {
	l := linearWithGrad(t)
	defer nn.Release(l.Parameters())
	l.Bias.Grad.Fill(math.NaN())
	for _, m := range []float64{1, 0} {
		n, err := nn.ClipGradNorm(l.Parameters(), m)
		require.NoError(t, err)
		require.True(t, math.IsNaN(n), "max norm %v: norm %v", m, n)
		require.Equal(t, []float32{1, 1}, l.Weight.Grad.Float32s(), "max norm %v", m)
	}
}

// TestOptimizerEmptyParameterList: an optimizer over no parameters updated
// nothing and reported nothing (a model whose Parameters were not passed,
// say); Step refuses it, as PyTorch's "optimizer got an empty parameter
// list", without counting a step.
func TestOptimizerEmptyParameterList(t *testing.T) {
	for _, ps := range [][]*nn.Parameter{nil, {}} {
		a := nn.NewAdamW(ps, 1e-3, 0)
		err := a.Step()
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Contains(t, err.Error(), "empty parameter list")
		require.Zero(t, a.Steps())
		err = nn.NewSGD(ps, 1e-3, 0).Step()
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Contains(t, err.Error(), "empty parameter list")
	}
}

// trainedLinear is linearWithGrad after one AdamW step, with its
// optimizer.
func trainedLinear(t *testing.T) (*nn.Linear, *nn.AdamW) {
	t.Helper()
	l := linearWithGrad(t)
	opt := nn.NewAdamW(l.Parameters(), 1e-2, 0.1)
	require.NoError(t, opt.Step())
	nn.ZeroGrad(l.Parameters())
	t.Cleanup(func() { opt.Release(); nn.Release(l.Parameters()) })
	return l, opt
}

// TestLoadTrainStateRefusesCorruptMoments: a training state whose
// exp_avg_sq has a negative or NaN entry, or whose exp_avg is not finite,
// was loaded, and the next step made the weights NaN; it is refused with
// the tensor's name, the model and optimizer unchanged.
func TestLoadTrainStateRefusesCorruptMoments(t *testing.T) {
	l, opt := trainedLinear(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), good, l.Parameters(), opt, nil))
	for _, c := range []struct {
		name string
		v    float32
	}{
		{nn.ExpAvgSqPrefix + "l.weight", -1e-3},
		{nn.ExpAvgSqPrefix + "l.weight", float32(math.NaN())},
		{nn.ExpAvgSqPrefix + "l.bias", float32(math.Inf(1))},
		{nn.ExpAvgPrefix + "l.weight", float32(math.NaN())},
		{nn.ExpAvgPrefix + "l.bias", float32(math.Inf(-1))},
	} {
		bad := filepath.Join(dir, "bad.safetensors")
		tensor.WithScope(func() {
			ts, meta, err := tensor.ReadSafetensors(good, tensor.CPU())
			require.NoError(t, err)
			vs := ts[c.name].Float32s()
			vs[0] = c.v
			ts[c.name] = tensor.FromFloat32s(tensor.CPU(), vs, ts[c.name].Shape()...)
			require.NoError(t, tensor.WriteSafetensors(bad, ts, meta))
		})
		l2, opt2 := trainedLinear(t)
		before := l2.Weight.Value.Float32s()
		var err error
		require.NotPanics(t, func() { _, err = nn.LoadTrainState(bad, l2.Parameters(), opt2) })
		require.ErrorIs(t, err, tensor.ErrArgument, "%s = %v", c.name, c.v)
		require.ErrorContains(t, err, c.name, "%s = %v", c.name, c.v)
		require.Equal(t, before, l2.Weight.Value.Float32s())
		require.Equal(t, 1, opt2.Steps())
	}
	_, err := nn.LoadTrainState(good, l.Parameters(), opt)
	require.NoError(t, err)
}

// TestTrainStateRefusesAnotherModelsOptimizer: saving or loading with an
// optimizer built over other parameters than those given saved no moments
// or loaded them into state the optimizer never reads, silently; it is an
// error now.
func TestTrainStateRefusesAnotherModelsOptimizer(t *testing.T) {
	l1, opt1 := trainedLinear(t)
	l2, opt2 := trainedLinear(t)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	err := nn.SaveTrainState(context.Background(), path, l2.Parameters(), opt1, nil)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "optimizer")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, l1.Parameters(), opt1, nil))
	before := l2.Weight.Value.Float32s()
	_, err = nn.LoadTrainState(path, l2.Parameters(), opt1)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "optimizer")
	require.Equal(t, before, l2.Weight.Value.Float32s())
	// Parameters given that leave out some of the optimizer's.
	_, err = nn.LoadTrainState(path, l1.Parameters()[:1], opt1)
	require.ErrorIs(t, err, tensor.ErrArgument)
	_, err = nn.LoadTrainState(path, l2.Parameters(), opt2)
	require.NoError(t, err)

	// An optimizer over a subset of the parameters (the rest frozen) saves
	// and loads with all of them.
	frozen := nn.NewAdamW(l1.Parameters()[:1], 1e-3, 0)
	require.NoError(t, nn.SaveTrainState(context.Background(), path, l1.Parameters(), frozen, nil))
	_, err = nn.LoadTrainState(path, l1.Parameters(), frozen)
	require.NoError(t, err)
}

// TestHalfPrecisionParametersRefused: a GPT, LayerNorm or RMSNorm with
// bfloat16 or float16 parameters was built, and its every Forward then
// failed at the first op (arithmetic runs in float32 and float64); their
// constructors refuse the dtype, pointing to float32 parameters under
// amp.Autocast. Linear and Embedding, which do run with half parameters
// (on half inputs), still accept it.
func TestHalfPrecisionParametersRefused(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		o := nn.Options{DType: dt}
		for name, mk := range map[string]func() (nn.Module, error){
			"NewGPT":       func() (nn.Module, error) { return nn.NewGPT(cfg, o) },
			"NewLayerNorm": func() (nn.Module, error) { return nn.NewLayerNorm(o, "ln", 8) },
			"NewRMSNorm":   func() (nn.Module, error) { return nn.NewRMSNorm(o, "rn", 8) },
		} {
			m, err := mk()
			if err == nil {
				nn.Release(m.Parameters())
			}
			require.ErrorIs(t, err, tensor.ErrArgument, "%s %v", name, dt)
			require.ErrorContains(t, err, dt.String(), "%s %v", name, dt)
			require.ErrorContains(t, err, "amp.Autocast", "%s %v", name, dt)
		}
		l, err := nn.NewLinear(o, "l", 4, 4, true, 0)
		require.NoError(t, err)
		e, err := nn.NewEmbedding(o, "e", 4, 4, 0)
		require.NoError(t, err)
		require.NoError(t, tensor.Try(func() {
			tensor.WithScope(func() {
				l.Forward(e.Forward(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 2)))
			})
		}))
		nn.Release(l.Parameters())
		nn.Release(e.Parameters())
	}
}

// TestNilArgumentsAreErrors: nil ids, a loss function returning nil, a nil
// optimizer or context, and a nil entry in a parameter list were raw
// nil-pointer panics; each is an error wrapping tensor.ErrArgument now (an
// *OpError panic for Forward and Loss, which tensor.Try returns).
func TestNilArgumentsAreErrors(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 1e-3, 0)
	defer opt.Release()
	ids := func() *tensor.Tensor { return tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 1, 2) }
	path := filepath.Join(t.TempDir(), "state.safetensors")
	l := linearWithGrad(t)
	defer nn.Release(l.Parameters())
	withNil := append(l.Parameters(), nil)
	for name, f := range map[string]func() error{
		"Forward(nil)": func() error { return tensor.Try(func() { tensor.WithScope(func() { g.Forward(nil) }) }) },
		"Loss(nil, ids)": func() error {
			return tensor.Try(func() { tensor.WithScope(func() { g.Loss(nil, ids()) }) })
		},
		"Loss(ids, nil)": func() error {
			return tensor.Try(func() { tensor.WithScope(func() { g.Loss(ids(), nil) }) })
		},
		"fused Loss(ids, nil)": func() error {
			g.HeadLoss.Fused = true
			defer func() { g.HeadLoss.Fused = false }()
			return tensor.Try(func() { tensor.WithScope(func() { g.Loss(ids(), nil) }) })
		},
		"TrainStep loss nil": func() error {
			_, err := nn.TrainStep(nil, ps, opt, func() *autograd.Var { return nil })
			return err
		},
		"TrainStep nil optimizer": func() error {
			_, err := nn.TrainStep(nil, ps, nil, func() *autograd.Var { return g.Loss(ids(), ids()) })
			return err
		},
		"TrainStep nil *AdamW": func() error {
			_, err := nn.TrainStep(nil, ps, (*nn.AdamW)(nil), func() *autograd.Var { return g.Loss(ids(), ids()) })
			return err
		},
		"SaveTrainState nil ctx": func() error {
			//lint:ignore SA1012 the misuse under test
			return nn.SaveTrainState(nil, path, ps, opt, nil)
		},
		"SaveTrainState nil optimizer": func() error { return nn.SaveTrainState(context.Background(), path, ps, nil, nil) },
		"LoadTrainState nil optimizer": func() error { _, err := nn.LoadTrainState(path, ps, nil); return err },
		"AdamW nil entry":              func() error { return nn.NewAdamW(withNil, 1e-3, 0).Step() },
		"SGD nil entry":                func() error { return nn.NewSGD(withNil, 1e-3, 0).Step() },
		"ClipGradNorm nil entry":       func() error { _, err := nn.ClipGradNorm(withNil, 1); return err },
		"SaveWeights nil entry":        func() error { return nn.SaveWeights(path, withNil, nil) },
		"SaveTrainState nil entry":     func() error { return nn.SaveTrainState(context.Background(), path, withNil, opt, nil) },
		"SaveWeightsLayout nil ctx": func() error {
			//lint:ignore SA1012 the misuse under test
			return nn.SaveWeightsLayout(nil, path, ps, nil, nn.LayoutHF)
		},
	} {
		var err error
		require.NotPanics(t, func() { err = f() }, name)
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		if strings.Contains(name, "nil entry") {
			require.ErrorContains(t, err, "parameter 2 is nil", name)
		}
	}
	require.Error(t, nn.Distinct(withNil), "Distinct refuses a nil entry, as its doc says")
}

// TestForwardErrorInPrivateCtxLeaksNothing: with a context of the
// caller's own, a Forward that failed on an id past the vocabulary left
// the positions' slice of Wpe (an op on a parameter alone, so an orphan of
// no scope until it met the caller's data) to the garbage collector, one
// tensor a call; it belongs to the ids' scope now.
func TestForwardErrorInPrivateCtxLeaksNothing(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	c := tensor.NewCtx()
	fail := func() error {
		return tensor.Try(func() {
			c.WithScope(func() { g.Forward(c.FromInt32s(tensor.CPU(), []int32{1, 99}, 1, 2)) })
		})
	}
	require.Error(t, fail())
	runtime.GC()
	runtime.GC()
	before := tensor.LeakedTensors()
	for range 5 {
		require.Error(t, fail())
	}
	runtime.GC()
	runtime.GC()
	require.Equal(t, before, tensor.LeakedTensors())
}

// TestGPTLossRefusesEmptyBatch: the loss of a batch of no tokens was 0,
// and TrainStep took an optimizer step on it (PyTorch's mean cross-entropy
// of nothing is NaN); GPT.Loss refuses it, full or fused head, and
// TrainStep changes nothing.
func TestGPTLossRefusesEmptyBatch(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 1e-2, 0)
	defer opt.Release()
	before := g.Wte.Weight.Value.Float32s()
	for _, fused := range []bool{false, true} {
		g.HeadLoss.Fused = fused
		for _, shape := range [][]int{{0, 4}, {2, 0}} {
			_, err := nn.TrainStep(nil, ps, opt, func() *autograd.Var {
				ids := tensor.Zeros(tensor.CPU(), tensor.Int32, shape...)
				return g.Loss(ids, ids)
			})
			require.ErrorIs(t, err, tensor.ErrShape, "fused %v %v", fused, shape)
			require.ErrorContains(t, err, "empty batch", "fused %v %v", fused, shape)
		}
	}
	require.Zero(t, opt.Steps())
	require.Equal(t, before, g.Wte.Weight.Value.Float32s())
}

// TestGPTSaveWeightsRecordsConfig: weights saved with the package's
// SaveWeights carry no config, so GPTConfigOfWeights could not tell the
// heads (generate then refused a width not a multiple of 64); GPT's
// SaveWeights records the config in train-gpt's metadata format, in
// either layout, and refuses a caller's "config" entry that says
// otherwise.
func TestGPTSaveWeightsRecordsConfig(t *testing.T) {
	cfg := nn.GPTConfig{Vocab: 16, Context: 8, Layers: 2, Heads: 3, Width: 12, Dropout: 0.1}
	g, err := nn.NewGPT(cfg, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	dir := t.TempDir()
	for _, l := range []nn.Layout{nn.LayoutNanoGPT, nn.LayoutHF} {
		path := filepath.Join(dir, l.String()+".safetensors")
		require.NoError(t, g.SaveWeights(context.Background(), path, map[string]string{"producer": "test"}, l))
		got, fromMeta, err := nn.GPTConfigOfWeights(path)
		require.NoError(t, err)
		require.True(t, fromMeta, l.String())
		require.Equal(t, cfg, got, l.String())
		meta, err := tensor.ReadSafetensorsMetadata(path)
		require.NoError(t, err)
		require.Equal(t, "test", meta["producer"])
		require.Equal(t, "{Vocab:16 Context:8 Layers:2 Heads:3 Width:12 Dropout:0.1 Batch:0}", meta["config"], "train-gpt's format")
		_, err = nn.LoadWeights(path, g.Parameters())
		require.NoError(t, err)
	}
	err = g.SaveWeights(context.Background(), filepath.Join(dir, "x.safetensors"), map[string]string{"config": "{Vocab:1}"}, nn.LayoutNanoGPT)
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestGPTForwardIdsErrorKinds: float ids are a dtype error, int32 ids of
// the wrong rank a shape error.
func TestGPTForwardIdsErrorKinds(t *testing.T) {
	g, err := nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{})
	require.NoError(t, err)
	defer nn.Release(g.Parameters())
	tensor.WithScope(func() {
		err := tensor.Try(func() { g.Forward(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2}, 1, 2)) })
		require.ErrorIs(t, err, tensor.ErrDType)
		err = tensor.Try(func() { g.Forward(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 2)) })
		require.ErrorIs(t, err, tensor.ErrShape)
	})
}
