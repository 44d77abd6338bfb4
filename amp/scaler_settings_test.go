package amp_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// TestScalerRefusesBadFactors: GrowthFactor, BackoffFactor and
// GrowthInterval set in the fields to values LoadMetadata refuses (and
// PyTorch's GradScaler asserts against: growth_factor > 1, backoff_factor
// < 1) were taken silently: a BackoffFactor of 1 never backs off, so
// every later step overflows and is skipped; 0 drops the scale to 2^-126
// at the first overflow; a GrowthInterval of 0 doubles the scale after
// every good step; a GrowthFactor of 0.5 shrinks it. Unscale and Record
// refuse them as they refuse a bad Scale: an *tensor.OpError wrapping
// tensor.ErrArgument naming the field, before changing any gradient.
func TestScalerRefusesBadFactors(t *testing.T) {
	for _, tc := range []struct {
		set  func(*amp.GradScaler)
		want string
	}{
		{func(s *amp.GradScaler) { s.GrowthFactor = 1 }, "GrowthFactor = 1"},
		{func(s *amp.GradScaler) { s.GrowthFactor = 0.5 }, "GrowthFactor = 0.5"},
		{func(s *amp.GradScaler) { s.GrowthFactor = math.NaN() }, "GrowthFactor = NaN"},
		{func(s *amp.GradScaler) { s.GrowthFactor = math.Inf(1) }, "GrowthFactor = +Inf"},
		{func(s *amp.GradScaler) { s.BackoffFactor = 1 }, "BackoffFactor = 1"},
		{func(s *amp.GradScaler) { s.BackoffFactor = 0 }, "BackoffFactor = 0"},
		{func(s *amp.GradScaler) { s.BackoffFactor = -0.5 }, "BackoffFactor = -0.5"},
		{func(s *amp.GradScaler) { s.BackoffFactor = math.NaN() }, "BackoffFactor = NaN"},
		{func(s *amp.GradScaler) { s.GrowthInterval = 0 }, "GrowthInterval = 0"},
		{func(s *amp.GradScaler) { s.GrowthInterval = -3 }, "GrowthInterval = -3"},
	} {
		s := amp.NewGradScaler(true)
		tc.set(s)
		c := tensor.NewCtx()
		c.WithScope(func() {
			g := grads(c, []float32{65536, 131072})
			err := tensor.Try(func() { s.Unscale(g) })
			require.ErrorIs(t, err, tensor.ErrArgument, tc.want)
			require.ErrorContains(t, err, tc.want)
			assert.Equal(t, []float32{65536, 131072}, g[0].Float32s(), "%s: a gradient changed", tc.want)
			err = tensor.Try(func() { s.Record(false) })
			require.ErrorIs(t, err, tensor.ErrArgument, tc.want)
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, tensor.Try(s.Update), tensor.ErrArgument, "%s: nothing was checked", tc.want)
			assert.Equal(t, 65536.0, s.Scale, tc.want)
		})
		assert.Zero(t, c.BytesInUse())
	}
	// The settings LoadMetadata accepts are accepted here too.
	s := amp.NewGradScaler(true)
	s.GrowthFactor, s.BackoffFactor, s.GrowthInterval = 1.0001, 0.9999, 1
	s.Record(false)
	s.Update()
	assert.Equal(t, 65536*1.0001, s.Scale)
	// A disabled scaler ignores its fields, as it does the Scale.
	d := amp.NewGradScaler(false)
	d.GrowthInterval = 0
	require.True(t, d.Unscale(nil))
	d.Update()
}
