package nn_test

// Misuse a client's review found going wrong silently (a result of the
// wrong shape, NaN outputs, a false alarm) or with a runtime panic that
// tensor.Try and nn.Step do not turn into an error.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestNilInputsAreOpErrors: a nil var given to RMSNorm, Dropout, the
// attention or MSELoss is an *tensor.OpError wrapping ErrArgument, as it
// is for Linear, LayerNorm and CrossEntropy, not a nil dereference that
// Step and TrainStep pass on as a crash.
func TestNilInputsAreOpErrors(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	defer nn.Release(g.Parameters())
	rms := nn.Must(nn.NewRMSNorm(nn.Options{}, "n", 4))
	defer nn.Release(rms.Parameters())
	one := func() *autograd.Var { return autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 2)) }
	for name, f := range map[string]func(){
		"RMSNorm":                   func() { rms.Forward(nil) },
		"Dropout training":          func() { (&nn.Dropout{P: 0.1, Training: true}).Forward(nil) },
		"Dropout eval":              func() { (&nn.Dropout{P: 0.1}).Forward(nil) },
		"CausalSelfAttention":       func() { g.Blocks[0].Attn.Forward(nil) },
		"MSELoss nil input":         func() { nn.MSELoss(nil, one(), nn.ReduceMean) },
		"MSELoss nil target":        func() { nn.MSELoss(one(), nil, nn.ReduceMean) },
		"MSELoss nil target in Var": func() { nn.MSELoss(one(), &autograd.Var{}, nn.ReduceMean) },
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(func() { tensor.WithScope(f) }) })
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.ErrorContains(t, err, "nil")
		})
	}
}

// TestRMSNormRefusesAnotherWidth: an input whose last axis is not the
// norm's width is an error, as torch.nn.RMSNorm's (and LayerNorm's) is;
// a last axis of 1 used to broadcast against the weight into a result of
// the weight's width.
func TestRMSNormRefusesAnotherWidth(t *testing.T) {
	n := nn.Must(nn.NewRMSNorm(nn.Options{}, "n", 4))
	defer nn.Release(n.Parameters())
	tensor.WithScope(func() {
		for _, shape := range [][]int{{2, 1}, {2, 3}, {4, 4, 1}} {
			var y *autograd.Var
			err := tensor.Try(func() { y = n.Forward(autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, shape...))) })
			require.ErrorIs(t, err, tensor.ErrShape, "input %v", shape)
			require.Nil(t, y, "input %v", shape)
		}
		y := n.Forward(autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 3, 4)))
		require.Equal(t, []int{3, 4}, y.Value.Shape())
	})
}

// TestLayerNormRefusesBadEps: a negative or NaN Eps is refused as by
// RMSNorm, instead of normalising every constant row to NaN.
func TestLayerNormRefusesBadEps(t *testing.T) {
	ln := nn.Must(nn.NewLayerNorm(nn.Options{}, "n", 4))
	defer nn.Release(ln.Parameters())
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 2, 4))
		for _, eps := range []float64{-1, math.NaN()} {
			ln.Eps = eps
			err := tensor.Try(func() { ln.Forward(x) })
			require.ErrorIs(t, err, tensor.ErrArgument, "eps %v", eps)
			require.ErrorContains(t, err, "eps", "eps %v", eps)
			err = tensor.Try(func() { ln.ForwardToProducts(x) })
			require.ErrorIs(t, err, tensor.ErrArgument, "eps %v", eps)
		}
		ln.Eps = 0
		require.NotPanics(t, func() { ln.Forward(autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4}, 1, 4))) })
	})
}

// TestAttentionRefusesUnknownKind: an Attention that is neither plain nor
// fused is an error, not plain attention in disguise.
func TestAttentionRefusesUnknownKind(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	defer nn.Release(g.Parameters())
	g.SetAttention(nn.Attention(5))
	tensor.WithScope(func() {
		err := tensor.Try(func() { g.Forward(tensor.Zeros(tensor.CPU(), tensor.Int32, 1, 4)) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.ErrorContains(t, err, "Attention(5)")
	})
}

// TestFusedLossRefusesTargetsOfAnotherShape: GPT.Loss refuses targets
// that are not the ids' (B, T) with the fused head as with the full one
// (it took any targets with as many elements).
func TestFusedLossRefusesTargetsOfAnotherShape(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	defer nn.Release(g.Parameters())
	for _, fused := range []bool{false, true} {
		g.HeadLoss.Fused = fused
		tensor.WithScope(func() {
			ids := tensor.Zeros(tensor.CPU(), tensor.Int32, 2, 3)
			for _, shape := range [][]int{{3, 2}, {6}, {1, 6}} {
				err := tensor.Try(func() { g.Loss(ids, tensor.Zeros(tensor.CPU(), tensor.Int32, shape...)) })
				require.ErrorIs(t, err, tensor.ErrShape, "fused %v, targets %v", fused, shape)
			}
			require.NotPanics(t, func() { g.Loss(ids, tensor.Zeros(tensor.CPU(), tensor.Int32, 2, 3)) })
		})
	}
}

// TestTrainStepRefusesNilParameter: a nil entry in TrainStep's
// parameters is an error naming it, as for the optimizers, not a nil
// dereference in ZeroGrad that crashes the program.
func TestTrainStepRefusesNilParameter(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "l", 2, 1, true, 0))
	defer nn.Release(l.Parameters())
	opt := nn.NewSGD(l.Parameters(), 0.1, 0)
	var err error
	require.NotPanics(t, func() {
		_, err = nn.TrainStep(nil, append(l.Parameters(), nil), opt, func() *autograd.Var {
			return autograd.Sum(l.Forward(autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 1, 2))), false)
		})
	})
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "parameter 2 is nil")
}

// TestNonFiniteLargeFloat64: NonFinite names only parameters with a NaN or
// an infinity: float64 weights whose squares overflow are finite (the sum
// of squares it checks overflowed to +Inf); a nil entry is an error.
func TestNonFiniteLargeFloat64(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{DType: tensor.Float64}, "l", 2, 2, true, 0))
	defer nn.Release(l.Parameters())
	l.Weight.Value.Fill(1e200)
	l.Bias.Value.Fill(-1e300)
	bad, err := nn.NonFinite(l.Parameters())
	require.NoError(t, err)
	require.Equal(t, "", bad)
	l.Bias.Value.Fill(math.Inf(-1))
	bad, err = nn.NonFinite(l.Parameters())
	require.NoError(t, err)
	require.Equal(t, "l.bias", bad)
	l.Bias.Value.Fill(math.NaN())
	bad, err = nn.NonFinite(l.Parameters())
	require.NoError(t, err)
	require.Equal(t, "l.bias", bad)
	require.NotPanics(t, func() { _, err = nn.NonFinite(append(l.Parameters(), nil)) })
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestPlacementRefusesNaNTolerance: a NaN tolerance is refused as one
// outside [0, 1) is (it passed, and no level could ever be kept).
func TestPlacementRefusesNaNTolerance(t *testing.T) {
	var buf bytes.Buffer
	_, err := nn.NewPlacement(planner{}, &nn.Checkpointing{}, nn.PlacementConfig{Tolerance: math.NaN(), Log: &buf, Now: time.Now})
	require.Error(t, err)
	require.ErrorContains(t, err, "tolerance")
}

type planner struct{}

func (planner) Step() (memory.Plan, error) { return memory.Plan{}, nil }

// TestCosineScheduleWarmupPastTotal pins what CosineSchedule's doc says of
// a warm-up at or past Total (nanoGPT's get_lr): the rate rises for
// Warmup steps, then is MinLR, with no decay between.
func TestCosineScheduleWarmupPastTotal(t *testing.T) {
	s := nn.CosineSchedule{Warmup: 10, Total: 5, MaxLR: 1, MinLR: 0.1}
	for it := range 10 {
		require.InDelta(t, float64(it+1)/11, s.LR(it), 1e-12, "step %d", it)
	}
	for it := 10; it < 20; it++ {
		require.Equal(t, 0.1, s.LR(it), "step %d", it)
	}
}

// TestCosineScheduleHugeWarmup: Warmup+1 overflowed int at the largest
// Warmup, giving a negative rate (train-gpt -warmup 9223372036854775807
// failed at step 1 with "AdamW: lr = -2.17e-22"); the rate is now tiny and
// positive, and a Total far below a huge Warmup does not overflow either.
func TestCosineScheduleHugeWarmup(t *testing.T) {
	s := nn.CosineSchedule{Warmup: math.MaxInt, Total: 2, MaxLR: 1e-3, MinLR: 1e-4}
	for it := range 3 {
		lr := s.LR(it)
		require.True(t, lr > 0 && lr < 1e-20, "step %d: %v", it, lr)
	}
	s = nn.CosineSchedule{Warmup: 0, Total: math.MaxInt, MaxLR: 1, MinLR: 0}
	require.InDelta(t, 1, s.LR(0), 1e-12)
	s = nn.CosineSchedule{Warmup: math.MinInt + 1, Total: math.MaxInt, MaxLR: 1, MinLR: 0}
	lr := s.LR(0)
	require.True(t, lr >= 0 && lr <= 1, "%v", lr)
}

// TestDistinctTiedParameters: two *Parameter entries wrapping one
// variable are one parameter listed twice (an optimizer would update it
// twice; dist's second gradient hook replaced the first).
func TestDistinctTiedParameters(t *testing.T) {
	a := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 2, false, 0))
	defer nn.Release(a.Parameters())
	w := a.Parameters()[0]
	tied := &nn.Parameter{Var: w.Var, Name: "tied"}
	err := nn.Distinct([]*nn.Parameter{w, tied})
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "wrap the same variable")
	require.NoError(t, nn.Distinct(a.Parameters()))
}

// TestByNameDuplicateIsArgumentError: two parameters of one name (two
// layers built with the same name) are an error wrapping
// tensor.ErrArgument, as ByName's doc says, for SaveWeights and the loads
// too, like a nil entry.
func TestByNameDuplicateIsArgumentError(t *testing.T) {
	a := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 2, true, 0))
	b := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 2, true, 0))
	ps := nn.Collect(a, b)
	defer nn.Release(ps)
	_, err := nn.ByName(ps)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, `"fc.weight"`)
	err = nn.SaveWeights(filepath.Join(t.TempDir(), "w.safetensors"), ps, nil)
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestLoadTrainStateRefusesCountPastStep: a parameter's own update count
// past the optimizer's step (which AdamW never has, and SaveTrainState
// never writes) is refused, and nothing changes.
func TestLoadTrainStateRefusesCountPastStep(t *testing.T) {
	g := nn.Must(nn.NewGPT(nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, nn.Options{}))
	ps := g.Parameters()
	defer nn.Release(ps)
	opt := nn.NewAdamW(ps, 1e-3, 0.1)
	defer opt.Release()
	ids := func() *tensor.Tensor { return tensor.FromInt32s(tensor.CPU(), []int32{1, 2, 3}, 1, 3) }
	_, err := nn.TrainStep(nil, ps, opt, func() *autograd.Var { return g.Loss(ids(), ids()) })
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "state.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), path, ps, opt, nil))
	c := tensor.NewCtx()
	c.WithScope(func() {
		ts, meta, err := c.ReadSafetensors(path, tensor.CPU())
		require.NoError(t, err)
		meta[nn.ParamStepPrefix+"transformer.wte.weight"] = "7"
		require.NoError(t, tensor.WriteSafetensors(path, ts, meta))
	})
	fresh := nn.NewAdamW(ps, 1e-3, 0.1)
	defer fresh.Release()
	_, err = nn.LoadTrainState(path, ps, fresh)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "optimizer.step.transformer.wte.weight = 7")
	require.Equal(t, 0, fresh.Steps(), "a refused file changes nothing")
}

// TestNonFiniteHalfParameters: NonFinite checks half-precision parameters
// (Linear and Embedding may have them) instead of failing with a dtype
// error.
func TestNonFiniteHalfParameters(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		l := nn.Must(nn.NewLinear(nn.Options{DType: dt}, "l", 2, 2, true, 0))
		bad, err := nn.NonFinite(l.Parameters())
		require.NoError(t, err, "%v", dt)
		require.Equal(t, "", bad, "%v", dt)
		l.Bias.Value.Fill(math.Inf(1))
		bad, err = nn.NonFinite(l.Parameters())
		require.NoError(t, err, "%v", dt)
		require.Equal(t, "l.bias", bad, "%v", dt)
		nn.Release(l.Parameters())
	}
}

// TestLoadWeightsRefusesValuesPastTheDType: finite values of the file
// that become infinite in the parameters' narrower dtype (float32's 1e6
// in float16, float64's 1e300 in float32) are refused like an infinity
// in the file, naming the tensor, and change no parameter: they loaded
// as +Inf weights.
func TestLoadWeightsRefusesValuesPastTheDType(t *testing.T) {
	for _, c := range []struct {
		from, to tensor.DType
		v        float64
	}{{tensor.Float32, tensor.Float16, 1e6}, {tensor.Float64, tensor.Float32, 1e300}, {tensor.Float32, tensor.BFloat16, 3.4e38}} {
		src := nn.Must(nn.NewLinear(nn.Options{DType: c.from}, "fc", 2, 2, true, 0))
		src.Weight.Value.Fill(c.v)
		path := filepath.Join(t.TempDir(), "w.safetensors")
		require.NoError(t, nn.SaveWeights(path, src.Parameters(), nil))
		dst := nn.Must(nn.NewLinear(nn.Options{DType: c.to}, "fc", 2, 2, true, 0))
		before := dst.Weight.Value.Float64s()
		_, err := nn.LoadWeights(path, dst.Parameters())
		require.ErrorIs(t, err, tensor.ErrArgument, "%v to %v", c.from, c.to)
		require.ErrorContains(t, err, `"fc.weight"`, "%v to %v", c.from, c.to)
		require.Equal(t, before, dst.Weight.Value.Float64s(), "a refused file changes nothing")
		// Values that fit load.
		src.Weight.Value.Fill(2)
		require.NoError(t, nn.SaveWeights(path, src.Parameters(), nil))
		_, err = nn.LoadWeights(path, dst.Parameters())
		require.NoError(t, err, "%v to %v", c.from, c.to)
		require.Equal(t, []float64{2, 2, 2, 2}, dst.Weight.Value.Float64s())
		nn.Release(src.Parameters())
		nn.Release(dst.Parameters())
	}
}

// TestAttentionLiteralWithoutDropout: a CausalSelfAttention written as a
// struct literal (it has no constructor) without its Dropouts attends
// without dropout, plain or fused, instead of dereferencing the nil
// Dropouts; a nil *Dropout is the identity.
func TestAttentionLiteralWithoutDropout(t *testing.T) {
	o := nn.Options{}
	a := &nn.CausalSelfAttention{CAttn: nn.Must(nn.NewLinear(o, "c_attn", 8, 24, true, 0)), CProj: nn.Must(nn.NewLinear(o, "c_proj", 8, 8, true, 0)), Heads: 2}
	defer nn.Release(nn.Collect(a.CAttn, a.CProj))
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 1, 3, 8))
		for _, kind := range []nn.Attention{nn.AttentionPlain, nn.AttentionFused} {
			a.Attention = kind
			var y *autograd.Var
			require.NoError(t, tensor.Try(func() { y = a.Forward(x) }), "%v", kind)
			require.Equal(t, []int{1, 3, 8}, y.Value.Shape(), "%v", kind)
		}
		var d *nn.Dropout
		require.Same(t, x, d.Forward(x))
	})
}

// TestSGDHalfGradients: SGD takes gradients kept in a half dtype
// (GPT.SetBlockGradDType) as AdamW does, updating exactly as with them
// widened beforehand; it failed with a dtype error after updating the
// parameters before the first such gradient.
func TestSGDHalfGradients(t *testing.T) {
	mk := func() []*nn.Parameter {
		var ps []*nn.Parameter
		for i, s := range [][]int{{3, 4}, {4}, {2, 5}} {
			l := nn.Must(nn.NewLinear(nn.Options{Rng: rand.New(rand.NewPCG(uint64(i), 9))}, fmt.Sprint("l", i), s[len(s)-1], max(s[0], 1), false, 0.5))
			ps = append(ps, l.Weight)
		}
		return ps
	}
	for _, momentum := range []float64{0, 0.9} {
		half, wide := mk(), mk()
		oh, ow := nn.NewSGD(half, 0.1, momentum), nn.NewSGD(wide, 0.1, momentum)
		oh.WeightDecay, ow.WeightDecay = 0.01, 0.01
		rng := rand.New(rand.NewPCG(7, 7))
		for step := range 2 {
			for i := range half {
				tensor.WithScope(func() {
					g := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, half[i].Value.Shape()...)
					if i != 1 {
						g = g.To(tensor.BFloat16)
					}
					half[i].Grad, wide[i].Grad = g.Clone(), g.To(tensor.Float32)
					tensor.Keep(half[i].Grad, wide[i].Grad)
				})
			}
			require.NoError(t, oh.Step(), "momentum %v step %d", momentum, step)
			require.NoError(t, ow.Step(), "momentum %v step %d", momentum, step)
			for i := range half {
				require.Equal(t, wide[i].Value.Float32s(), half[i].Value.Float32s(), "momentum %v step %d parameter %d", momentum, step, i)
			}
			nn.ZeroGrad(half)
			nn.ZeroGrad(wide)
		}
		oh.Release()
		ow.Release()
		nn.Release(half)
		nn.Release(wide)
	}
}

// TestParseGPTConfigRefusesAmbiguousText: a field given twice (the last
// one won), text after the JSON object (ignored), and a negative batch
// size (Validate let it through) are errors.
func TestParseGPTConfigRefusesAmbiguousText(t *testing.T) {
	for _, bad := range []string{
		"{Vocab:16 Context:8 Layers:1 Heads:2 Width:8 Vocab:32}",
		`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8,"Vocab":32}`,
		`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8} {"Vocab":32}`,
		`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8} trailing`,
		`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8}}`,
		`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8,"vocab":32}`,
		"{Vocab:16 Context:8 Layers:1 Heads:2 Width:8 Batch:-4}",
		"{Vocab:sixteen Context:8 Layers:1 Heads:2 Width:8}",
		"Vocab:16",
		`{"Vocab":"16"}`,
	} {
		_, err := nn.ParseGPTConfig(bad)
		require.ErrorIs(t, err, tensor.ErrArgument, bad) // as Validate's: every refusal says it is the argument's
	}
	require.ErrorIs(t, nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8, Batch: -1}.Validate(), tensor.ErrArgument)
	c, err := nn.ParseGPTConfig(`{"Vocab":16,"Context":8,"Layers":1,"Heads":2,"Width":8}` + "\n")
	require.NoError(t, err)
	require.Equal(t, nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 8}, c)
}

// TestWeightsReadersRefuseDuplicateKeys: a header giving a tensor's name
// twice was refused by tensor.ReadSafetensors but loaded by nn.LoadWeights
// and described by nn.ReadWeightsInfo (encoding/json keeps the last):
// both refuse it now, naming the key.
func TestWeightsReadersRefuseDuplicateKeys(t *testing.T) {
	l := nn.Must(nn.NewLinear(nn.Options{}, "w", 2, 1, false, 0))
	defer nn.Release(l.Parameters())
	hdr := `{"w.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"w.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}}`
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	buf = append(append(buf, hdr...), make([]byte, 8)...)
	path := filepath.Join(t.TempDir(), "dup.safetensors")
	require.NoError(t, os.WriteFile(path, buf, 0o600))
	_, err := nn.LoadWeights(path, l.Parameters())
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, `duplicate tensor name "w.weight"`)
	_, err = nn.ReadWeightsInfo(path)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, `duplicate tensor name "w.weight"`)
}

// TestCosineScheduleNegativeSteps: a negative step is step 0 and a
// negative Warmup none; the rate stays in [MinLR, MaxLR] (step -3 without
// warm-up gave -2 for MaxLR 1, MinLR 0).
func TestCosineScheduleNegativeSteps(t *testing.T) {
	s := nn.CosineSchedule{Warmup: 0, Total: 10, MaxLR: 1, MinLR: 0}
	for _, it := range []int{-3, -1, math.MinInt} {
		require.Equal(t, s.LR(0), s.LR(it), "step %d", it)
	}
	neg := nn.CosineSchedule{Warmup: -5, Total: 10, MaxLR: 1, MinLR: 0.1}
	pos := nn.CosineSchedule{Warmup: 0, Total: 10, MaxLR: 1, MinLR: 0.1}
	for it := range 12 {
		require.Equal(t, pos.LR(it), neg.LR(it), "step %d", it)
	}
}
