package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestZeroAdamWRefusesGradientOfAnotherDType: a float64 or int32
// gradient of a float32 parameter is an error wrapping tensor.ErrDType
// naming the parameter, as nn.AdamW's Step refuses it, before anything
// changes; a half gradient is taken, as nn.AdamW takes it.
func TestZeroAdamWRefusesGradientOfAnotherDType(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Int32} {
		p := param(t, "w", tensor.Float32, 4)
		p.Value.Fill(1)
		g := tensor.FromFloat64s(tensor.CPU(), []float64{1.7, 1.7, 1.7, 1.7}, 4)
		p.Grad = g.To(dt)
		g.Release()
		tensor.Keep(p.Grad)
		require.ErrorIs(t, nn.NewAdamW([]*nn.Parameter{p}, 1e-3, 0).Step(), tensor.ErrDType, "nn.AdamW, %v", dt)

		o, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], []*nn.Parameter{p}, 1e-3, 0)
		require.NoError(t, err)
		err = o.Step()
		require.ErrorIs(t, err, tensor.ErrDType, "%v gradient", dt)
		assert.ErrorContains(t, err, `"w"`)
		assert.Equal(t, []float32{1, 1, 1, 1}, p.Value.Float32s(), "%v gradient: the weights changed", dt)
		assert.Equal(t, 0, o.Steps(), "%v gradient: the step was counted", dt)
		o.Release()
		p.ZeroGrad()
	}

	p := param(t, "h", tensor.Float32, 4)
	g := tensor.FromFloat32s(tensor.CPU(), []float32{1, 1, 1, 1}, 4)
	p.Grad = g.To(tensor.BFloat16)
	g.Release()
	tensor.Keep(p.Grad)
	o, err := dist.NewZeroAdamW(dist.NewLocalGroup(1)[0], []*nn.Parameter{p}, 1e-3, 0)
	require.NoError(t, err)
	defer o.Release()
	require.NoError(t, o.Step(), "a bfloat16 gradient of a float32 parameter")
	assert.Equal(t, 1, o.Steps())
	p.ZeroGrad()
}
