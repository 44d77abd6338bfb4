package nn_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLoadTrainStateRefusesNonFiniteWeights: LoadWeights refuses a NaN
// or an infinity in a file's weights, and values its parameter's dtype
// would make infinite, naming the tensor; LoadTrainState loaded them
// (its moments alone were checked, and in the file's dtype: float64
// moments past float32's range became infinite in the float32 state),
// and the resumed run's first step failed with a loss of NaN that blamed
// the learning rate or the data. They are refused with the tensor's name,
// the model and optimizer unchanged.
func TestLoadTrainStateRefusesNonFiniteWeights(t *testing.T) {
	l, opt := trainedLinear(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), good, l.Parameters(), opt, nil))
	for _, c := range []struct {
		name string
		v    float64
		dt   tensor.DType
	}{
		{"l.weight", math.NaN(), tensor.Float32},
		{"l.bias", math.Inf(-1), tensor.Float32},
		{"l.weight", 1e300, tensor.Float64},                    // infinite in the parameter's float32
		{nn.ExpAvgPrefix + "l.weight", 1e300, tensor.Float64},  // and in its optimizer state's
		{nn.ExpAvgSqPrefix + "l.bias", -1e300, tensor.Float64}, // negative anyway
	} {
		bad := filepath.Join(dir, "bad.safetensors")
		tensor.WithScope(func() {
			ts, meta, err := tensor.ReadSafetensors(good, tensor.CPU())
			require.NoError(t, err)
			vs := ts[c.name].Float64s()
			vs[0] = c.v
			ts[c.name] = tensor.FromFloat64s(tensor.CPU(), vs, ts[c.name].Shape()...).To(c.dt)
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

// TestLoadTrainStateRefusesIntegerMoments: a training state whose AdamW
// moments are integers (int32) is not one SaveTrainState wrote, and its
// weights of that dtype are refused (a float is wanted), but its moments
// were converted to the parameter's float and loaded, the next step
// continuing from truncated state. They are refused too, naming the
// tensor, the model and optimizer unchanged.
func TestLoadTrainStateRefusesIntegerMoments(t *testing.T) {
	l, opt := trainedLinear(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.safetensors")
	require.NoError(t, nn.SaveTrainState(context.Background(), good, l.Parameters(), opt, nil))
	for _, name := range []string{nn.ExpAvgPrefix + "l.weight", nn.ExpAvgSqPrefix + "l.bias"} {
		bad := filepath.Join(dir, "bad.safetensors")
		tensor.WithScope(func() {
			ts, meta, err := tensor.ReadSafetensors(good, tensor.CPU())
			require.NoError(t, err)
			ts[name] = ts[name].To(tensor.Int32)
			require.NoError(t, tensor.WriteSafetensors(bad, ts, meta))
		})
		l2, opt2 := trainedLinear(t)
		before := l2.Weight.Value.Float32s()
		_, err := nn.LoadTrainState(bad, l2.Parameters(), opt2)
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		require.ErrorContains(t, err, name)
		require.ErrorContains(t, err, "want a float")
		require.Equal(t, before, l2.Weight.Value.Float32s())
		require.Equal(t, 1, opt2.Steps())
	}
}
