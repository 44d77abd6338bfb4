package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestSGDRefusesGradientOfAnotherDType: SGD widens a half gradient of a
// float32 parameter, as AdamW does, and refuses any other dtype (an int32
// or float64 gradient of a float32 parameter) with an error wrapping
// tensor.ErrDType, as AdamW does, leaving the parameter as it was; it
// converted them with To, updating by the int32 gradient's truncated
// values.
func TestSGDRefusesGradientOfAnotherDType(t *testing.T) {
	dev := tensor.CPU()
	for _, dt := range []tensor.DType{tensor.Int32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			l, err := nn.NewLinear(nn.Options{}, "l", 3, 2, false, 0.02)
			require.NoError(t, err)
			defer nn.Release(l.Parameters())
			w := l.Weight
			before := w.Value.Float32s()
			g := tensor.FromFloats(dev, dt, []float64{1.7, 2, 3, 4, 5, 6}, 2, 3)
			tensor.Keep(g)
			w.Grad = g
			require.ErrorIs(t, nn.NewSGD(l.Parameters(), 0.1, 0).Step(), tensor.ErrDType)
			require.Equal(t, before, w.Value.Float32s(), "the parameter is as it was")
		})
	}
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			l, err := nn.NewLinear(nn.Options{}, "l", 3, 2, false, 0.02)
			require.NoError(t, err)
			defer nn.Release(l.Parameters())
			w := l.Weight
			before := w.Value.Float32s()
			g := tensor.FromFloats(dev, dt, []float64{1, 2, 3, 4, 5, 6}, 2, 3)
			tensor.Keep(g)
			w.Grad = g
			require.NoError(t, nn.NewSGD(l.Parameters(), 0.1, 0).Step())
			after := w.Value.Float32s()
			for i := range after {
				require.InDelta(t, before[i]-0.1*float32(i+1), after[i], 1e-6)
			}
		})
	}
}
