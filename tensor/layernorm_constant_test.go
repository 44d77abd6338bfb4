package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestLayerNormConstantRowsFloat64OnDevices: a float64 row of one value
// far from zero (+-1e30, and 1e300, whose squared deviations overflow
// if they are not exact) normalises to 0 with the value as its mean, on
// every device. The rounded sum's mean is an ulp off such a row; the
// CPU (cpukern) and the CUDA kernel (kernels/layernorm.cuh) correct it by
// the mean of the deviations, and without that gave y = +-1 (the CUDA
// kernel until session 41).
func TestLayerNormConstantRowsFloat64OnDevices(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, v := range []float64{1e30, -1e30, 1e300, 3.7} {
			for _, cols := range []int{3, 7, 100, 1000} {
				x := make([]float64, 2*cols)
				for i := range x {
					x[i] = v
				}
				xt := tensor.FromFloats(dev, tensor.Float64, x, 2, cols)
				y, mean, rstd := tensor.LayerNorm(xt, nil, nil, 1e-5)
				for i, got := range y.Float64s() {
					require.Zero(t, got, "%g x %d: y[%d]", v, cols, i)
				}
				for i, got := range mean.Float64s() {
					require.Equal(t, v, got, "%g x %d: mean[%d]", v, cols, i)
				}
				for _, u := range []*tensor.Tensor{xt, y, mean, rstd} {
					u.Release()
				}
			}
		}
	})
}
