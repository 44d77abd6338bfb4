package amp_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

func grads(c *tensor.Ctx, vals ...[]float32) []*tensor.Tensor {
	var ts []*tensor.Tensor
	for _, v := range vals {
		ts = append(ts, c.FromFloat32s(tensor.CPU(), v))
	}
	return ts
}

func TestScalerUnscalesAndGrows(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		s := amp.NewGradScaler(true)
		s.GrowthInterval = 3
		require.Equal(t, 65536.0, s.LossScale())
		for step := range 3 {
			g := grads(c, []float32{65536, -131072}, []float32{32768})
			require.True(t, s.Unscale(append(g, nil)), "step %d", step)
			assert.Equal(t, []float32{1, -2}, g[0].Float32s())
			assert.Equal(t, []float32{0.5}, g[1].Float32s())
			s.Update()
		}
		assert.Equal(t, 131072.0, s.Scale, "grown after GrowthInterval good steps")
		assert.Zero(t, s.Skipped())
	})
	assert.Zero(t, c.BytesInUse())
}

func TestScalerSkipsAndBacksOffOnOverflow(t *testing.T) {
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			s := amp.NewGradScaler(true)
			s.GrowthInterval = 2
			require.True(t, s.Unscale(grads(c, []float32{1})))
			s.Update() // one good step
			g := grads(c, []float32{1, 2}, []float32{3, bad, 4})
			require.False(t, s.Unscale(g), "an injected %v is found", bad)
			s.Update()
			assert.Equal(t, 32768.0, s.Scale, "halved")
			assert.Equal(t, 1, s.Skipped())
			require.True(t, s.Unscale(grads(c, []float32{1})))
			s.Update()
			assert.Equal(t, 32768.0, s.Scale, "the good-step count restarted after the skip")
			require.True(t, s.Unscale(grads(c, []float32{1})))
			s.Update()
			assert.Equal(t, 65536.0, s.Scale)
		})
	}
}

func TestDisabledScalerIsANoOp(t *testing.T) {
	for _, st := range []amp.State{{}, {Enabled: true, DType: tensor.BFloat16}, {TF32: true}} {
		s := amp.ScalerFor(st)
		require.False(t, s.Enabled(), "%v", st)
		assert.Equal(t, 1.0, s.LossScale())
		c := tensor.NewCtx()
		c.WithScope(func() {
			g := grads(c, []float32{float32(math.Inf(1)), 3})
			assert.True(t, s.Unscale(g))
			s.Update()
			assert.Equal(t, float32(3), g[0].Float32s()[1], "gradients untouched")
		})
		assert.Nil(t, s.Metadata())
	}
	assert.True(t, amp.ScalerFor(amp.State{Enabled: true, DType: tensor.Float16}).Enabled())
}

func TestScalerMisuse(t *testing.T) {
	s := amp.NewGradScaler(true)
	c := tensor.NewCtx()
	c.WithScope(func() {
		require.True(t, s.Unscale(grads(c, []float32{1})))
		err := tensor.Try(func() { s.Unscale(grads(c, []float32{1})) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		s.Update()
		err = tensor.Try(func() { s.Unscale([]*tensor.Tensor{c.Zeros(tensor.CPU(), tensor.Float64, 2)}) })
		require.ErrorIs(t, err, tensor.ErrDType)
	})
}

func TestScalerMetadataRoundTrip(t *testing.T) {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = 5
	c := tensor.NewCtx()
	c.WithScope(func() {
		for _, v := range []float32{1, float32(math.NaN()), 1} {
			s.Unscale(grads(c, []float32{v}))
			s.Update()
		}
	})
	md := s.Metadata()
	r := amp.NewGradScaler(true)
	require.NoError(t, r.LoadMetadata(md))
	assert.Equal(t, s.Scale, r.Scale)
	assert.Equal(t, 5, r.GrowthInterval)
	assert.Equal(t, 1, r.Skipped())
	assert.Equal(t, md, r.Metadata())
	require.ErrorContains(t, r.LoadMetadata(map[string]string{"amp.scale": "-1"}), "amp.scale")
	require.ErrorContains(t, r.LoadMetadata(map[string]string{"amp.good_steps": "x"}), "amp.good_steps")
	// Values PyTorch's GradScaler refuses, and a bad entry beside good
	// ones: an error, and the scaler as it was.
	for _, bad := range []map[string]string{
		{"amp.growth_interval": "0"},
		{"amp.growth_factor": "1"},
		{"amp.backoff_factor": "1.5"},
		{"amp.scale": "1024", "amp.growth_interval": "7", "amp.skipped": "-2"},
	} {
		require.Error(t, r.LoadMetadata(bad), "%v", bad)
		require.Equal(t, md, r.Metadata(), "%v", bad)
	}
}

// A step that fails with an error between Unscale and Update is dropped:
// the next step runs as if it had not started.
func TestScalerAbortStep(t *testing.T) {
	s := amp.NewGradScaler(true)
	c := tensor.NewCtx()
	c.WithScope(func() {
		require.False(t, s.Unscale(grads(c, []float32{float32(math.Inf(1))})))
		s.AbortStep() // say the optimizer step then ran out of memory
		require.True(t, s.Unscale(grads(c, []float32{1})), "no 'called twice' panic")
		s.Update()
	})
	assert.Equal(t, 65536.0, s.Scale, "the aborted step neither skipped nor backed off")
	assert.Zero(t, s.Skipped())
}

// An Update with no inf check before it (no Unscale or Record since the
// last one) is an error, as PyTorch's GradScaler.update asserts ("No inf
// checks were recorded prior to update"): it must not count a good step
// and grow the scale. An Unscale that failed checks nothing either.
func TestScalerUpdateWithoutCheck(t *testing.T) {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = 1
	err := tensor.Try(s.Update)
	require.ErrorIs(t, err, tensor.ErrArgument)
	assert.Equal(t, 65536.0, s.Scale, "no step was checked: nothing grows")
	c := tensor.NewCtx()
	c.WithScope(func() {
		require.True(t, s.Unscale(grads(c, []float32{1})))
		s.Update()
		assert.Equal(t, 131072.0, s.Scale)
		require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "one Update per check")
		err = tensor.Try(func() { s.Unscale([]*tensor.Tensor{c.Zeros(tensor.CPU(), tensor.Float64, 2)}) })
		require.ErrorIs(t, err, tensor.ErrDType)
		require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "the failed Unscale checked nothing")
		require.True(t, s.Unscale(grads(c, []float32{1})), "and may be retried")
		s.Update()
	})
	assert.Equal(t, 262144.0, s.Scale)
	amp.NewGradScaler(false).Update() // a disabled scaler does nothing
}

// A run that overflows at every step backs the scale off to float32's
// smallest normal and no further: a scale of 0 would zero every gradient
// (steps of nothing that count as good) and could not be saved and loaded.
func TestScalerBackoffStopsAboveZero(t *testing.T) {
	s := amp.NewGradScaler(true)
	for range 2000 {
		s.Record(true)
		s.Update()
	}
	require.Equal(t, 0x1p-126, s.Scale)
	restored := amp.NewGradScaler(true)
	require.NoError(t, restored.LoadMetadata(s.Metadata()))
	require.Equal(t, s.Scale, restored.Scale)
}

// Unscale reports a step good only if the gradients it leaves are finite.
// A scale that float32 cannot divide by (0, NaN, infinite, negative, or
// below float32's smallest normal, whose reciprocal overflows float32) is
// refused before any gradient changes; a scale below 1 that makes a
// finite gradient overflow as it is unscaled reports the step bad.
func TestScalerUnscaleReportsTheUnscaledGradients(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		for _, bad := range []float64{0, math.NaN(), math.Inf(1), math.Inf(-1), -1, 1e-300, 1e-45, 0x1p-127, 1e39} {
			s := amp.NewGradScaler(true)
			s.Scale = bad
			g := grads(c, []float32{0, 1e-3})
			err := tensor.Try(func() { s.Unscale(g) })
			require.ErrorIs(t, err, tensor.ErrArgument, "Scale %v", bad)
			require.ErrorContains(t, err, "amp.GradScaler.Unscale", "Scale %v", bad)
			require.ErrorContains(t, err, "Scale", "Scale %v", bad)
			assert.Equal(t, []float32{0, 1e-3}, g[0].Float32s(), "Scale %v: the gradients changed", bad)
			require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "Scale %v: the refused Unscale checked nothing", bad)
			require.ErrorIs(t, tensor.Try(func() { s.Record(false) }), tensor.ErrArgument, "Record, Scale %v", bad)
		}
		// The extremes of the range are used.
		for _, sc := range []float64{0x1p-126, math.MaxFloat32} {
			s := amp.NewGradScaler(true)
			s.Scale = sc
			g := grads(c, []float32{0, 1e-30})
			require.True(t, s.Unscale(g), "Scale %v", sc)
			for _, v := range g[0].Float32s() {
				assert.False(t, math.IsInf(float64(v), 0) || v != v, "Scale %v: %v", sc, v)
			}
			s.Update()
		}
		// A finite gradient that overflows as it is divided by a small scale.
		s := amp.NewGradScaler(true)
		s.Scale = 0x1p-100
		g := grads(c, []float32{1, 1e30})
		require.False(t, s.Unscale(g), "1e30 / 2^-100 is +Inf")
		s.Update()
		assert.Equal(t, 1, s.Skipped())
	})
}

// LoadMetadata refuses a scale float32 cannot use (outside [2^-126, max
// float32]: "1e-300" became 0 in float32, NaN gradients reported good)
// and non-finite growth settings.
func TestScalerLoadMetadataRefusesUnusableScales(t *testing.T) {
	r := amp.NewGradScaler(true)
	md := r.Metadata()
	for _, bad := range []map[string]string{
		{"amp.scale": "1e-300"}, {"amp.scale": "1e-45"}, {"amp.scale": "0x1p-127"}, {"amp.scale": "1e39"},
		{"amp.scale": "0"}, {"amp.scale": "NaN"}, {"amp.scale": "+Inf"},
		{"amp.growth_factor": "NaN"}, {"amp.growth_factor": "+Inf"}, {"amp.growth_factor": "Inf"},
		{"amp.backoff_factor": "NaN"}, {"amp.backoff_factor": "-Inf"},
	} {
		require.Error(t, r.LoadMetadata(bad), "%v", bad)
		require.Equal(t, md, r.Metadata(), "%v", bad)
	}
	for _, good := range []string{"0x1p-126", "3.4028234663852886e+38", "1"} {
		require.NoError(t, r.LoadMetadata(map[string]string{"amp.scale": good}), good)
	}
}

// Growth stops at float32's largest finite number: a scale above it
// would seed backward with +Inf.
func TestScalerGrowthStopsAtMaxFloat32(t *testing.T) {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = 1
	s.Scale = math.MaxFloat32 / 1.5
	for range 3 {
		s.Record(false)
		s.Update()
	}
	require.Equal(t, math.MaxFloat32/1.5, s.Scale)
}

// A float16 scaler cannot unscale half gradients (a GPT's block weights
// after SetBlockGradDType(bf16)): the first Unscale says why, naming the
// gradient, before changing any, and checks nothing.
func TestScalerRefusesHalfGradients(t *testing.T) {
	s := amp.ScalerFor(amp.State{Enabled: true, DType: tensor.Float16})
	c := tensor.NewCtx()
	c.WithScope(func() {
		for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
			g := grads(c, []float32{65536})
			half := c.Zeros(tensor.CPU(), dt, 96, 32)
			err := tensor.Try(func() { s.Unscale([]*tensor.Tensor{g[0], nil, half}) })
			require.ErrorIs(t, err, tensor.ErrDType, "%v", dt)
			require.ErrorContains(t, err, "gradient 2 is "+dt.String())
			require.ErrorContains(t, err, "float16 loss scaling needs float32 gradients")
			require.ErrorContains(t, err, "bfloat16 autocast, which needs no scaler")
			assert.Equal(t, []float32{65536}, g[0].Float32s(), "%v: a gradient changed", dt)
			require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "%v: nothing was checked", dt)
		}
	})
}

// An Unscale given no gradient (an empty list, or nil ones only: backward
// did not run, or the list was gathered before it) checked nothing, as
// PyTorch's GradScaler refuses a step with no inf check recorded ("No
// inf checks were recorded for this optimizer"). It used to report the
// step good and count it towards growth: GrowthInterval such steps grew
// the scale with no gradient ever seen.
func TestScalerUnscaleWithNoGradients(t *testing.T) {
	s := amp.NewGradScaler(true)
	s.GrowthInterval = 1
	for _, gs := range [][]*tensor.Tensor{nil, {}, {nil, nil}} {
		err := tensor.Try(func() { s.Unscale(gs) })
		require.ErrorIs(t, err, tensor.ErrArgument, "%d gradients", len(gs))
		require.ErrorContains(t, err, "no gradients to check")
		require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "nothing was checked")
	}
	assert.Equal(t, 65536.0, s.Scale, "nothing grew")
	assert.True(t, amp.NewGradScaler(false).Unscale(nil), "a disabled scaler checks nothing and needs nothing")
}
