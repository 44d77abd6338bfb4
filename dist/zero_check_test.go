package dist_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestZeroAdamWRefusesBadParameters: a parameter whose value is not
// contiguous (its update would be written into a copy and lost) and a
// parameter given twice are errors naming the parameter.
func TestZeroAdamWRefusesBadParameters(t *testing.T) {
	g := newGPT(t, tinyGPT, 1)
	ps := g.Parameters()
	coll := dist.NewLocalGroup(1)[0]

	_, err := dist.NewZeroAdamW(coll, append(ps[:1:1], ps[0]), 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, ps[0].Name)

	w := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	tensor.Keep(w)
	defer w.Release()
	wt := w.T()
	tensor.Keep(wt)
	defer wt.Release()
	p := &nn.Parameter{Var: autograd.Param(wt, "wt"), Name: "wt"}
	_, err = dist.NewZeroAdamW(coll, []*nn.Parameter{p}, 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "wt")
}

// TestZeroAdamWRefusesBadSettings: ZeroAdamW refuses what nn.AdamW
// refuses — a learning rate, eps or weight decay that is NaN, infinite or
// negative, a beta outside [0, 1) — with an error naming the setting and
// its value, before it changes anything: the constructor for lr and
// weight decay, Step for every setting (set later in the fields or with
// SetLR). The weights stay as they were.
func TestZeroAdamWRefusesBadSettings(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		lr, wd float64
		want   string
	}{
		{-1, 0, "lr = -1"}, {nan, 0, "lr = NaN"}, {inf, 0, "lr = +Inf"},
		{1e-3, -1, "weight_decay = -1"}, {1e-3, nan, "weight_decay = NaN"}, {1e-3, inf, "weight_decay = +Inf"},
	} {
		_, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], []*nn.Parameter{param(t, "w", tensor.Float32, 4)}, c.lr, c.wd)
		require.ErrorIs(t, err, tensor.ErrArgument, c.want)
		require.ErrorContains(t, err, c.want)
	}
	for _, c := range []struct {
		set  func(*dist.ZeroAdamW)
		want string
	}{
		{func(o *dist.ZeroAdamW) { o.SetLR(nan) }, "lr = NaN"},
		{func(o *dist.ZeroAdamW) { o.LR = inf }, "lr = +Inf"},
		{func(o *dist.ZeroAdamW) { o.SetLR(-1) }, "lr = -1"},
		{func(o *dist.ZeroAdamW) { o.Eps = -1 }, "eps = -1"},
		{func(o *dist.ZeroAdamW) { o.Eps = nan }, "eps = NaN"},
		{func(o *dist.ZeroAdamW) { o.Beta1 = 1.5 }, "beta1 = 1.5"},
		{func(o *dist.ZeroAdamW) { o.Beta1 = -0.1 }, "beta1 = -0.1"},
		{func(o *dist.ZeroAdamW) { o.Beta2 = 1 }, "beta2 = 1"},
		{func(o *dist.ZeroAdamW) { o.Beta2 = nan }, "beta2 = NaN"},
		{func(o *dist.ZeroAdamW) { o.WeightDecay = nan }, "weight_decay = NaN"},
		{func(o *dist.ZeroAdamW) { o.WeightDecay = -0.5 }, "weight_decay = -0.5"},
	} {
		p := param(t, "w", tensor.Float32, 4)
		p.Decay = true
		p.Value.Fill(1)
		p.Grad = tensor.FromFloat32s(tensor.CPU(), []float32{1, 1, 1, 1}, 4)
		tensor.Keep(p.Grad)
		o, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], []*nn.Parameter{p}, 1e-3, 0.1)
		require.NoError(t, err)
		c.set(o)
		err = o.Step()
		require.ErrorIs(t, err, tensor.ErrArgument, c.want)
		require.ErrorContains(t, err, c.want)
		assert.Equal(t, []float32{1, 1, 1, 1}, p.Value.Float32s(), "%s: the weights changed", c.want)
		assert.Equal(t, 0, o.Steps(), "%s: the step was counted", c.want)
		o.Release()
		p.ZeroGrad()
	}
}

// TestZeroAdamWEmptyTrainableParameters: trainable parameters that are
// all empty are refused as such, not as "no trainable parameter".
func TestZeroAdamWEmptyTrainableParameters(t *testing.T) {
	ps := []*nn.Parameter{shaped(t, "e", tensor.Float32, 0), shaped(t, "f", tensor.Float32, 2, 0)}
	_, err := dist.NewZeroAdamW(dist.NewLocalGroup(2)[0], ps, 1e-3, 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.ErrorContains(t, err, `the 2 trainable parameters ("e" first) have no element`)
	_, err = dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], nil, 1e-3, 0)
	assert.ErrorContains(t, err, "no trainable parameter")
}
