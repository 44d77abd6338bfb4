package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestLayerNormWithoutBias: a LayerNorm with a nil Bias (nanoGPT's
// LayerNorm(ndim, bias=False)) normalises and scales as
// torch.nn.functional.layer_norm(x, (3,), weight=w, bias=None) does, and
// lists only its weight, instead of dereferencing the nil parameter; one
// without either is F.layer_norm without weight and bias.
func TestLayerNormWithoutBias(t *testing.T) {
	ln := nn.Must(nn.NewLayerNorm(nn.Options{DType: tensor.Float64}, "ln", 3))
	nn.Release([]*nn.Parameter{ln.Bias})
	ln.Bias = nil
	defer nn.Release([]*nn.Parameter{ln.Weight})
	// PyTorch 1.13, float64.
	wantY := []float64{-0.534520765725149, 0.2672603828625746, 2.6726038286257436, -0.5555828790463038, 0.20203013783501955, 2.626391791855254}
	wantDx := []float64{1.4890074065936316, -2.2335368812616925, 0.7445294746680617, 2.6593643086068894, -4.255004267656479, 1.5956399590495887}
	wantDw := []float64{-5.513704563820728, -1.544671454900247, 11.888081118504378}
	tensor.WithScope(func() {
		ln.Weight.Value.CopyFrom(tensor.FromFloat64s(tensor.CPU(), []float64{0.5, -1, 2}, 3))
		for _, fwd := range []func(*autograd.Var) *autograd.Var{ln.Forward, ln.ForwardToProducts} {
			ln.Weight.ZeroGrad()
			x := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{1, 2, 4, -1, 0.5, 3}, 2, 3), "x")
			var y *autograd.Var
			require.NoError(t, tensor.Try(func() { y = fwd(x) }))
			require.InDeltaSlice(t, wantY, y.Value.Float64s(), 1e-12)
			up := autograd.Const(tensor.FromFloat64s(tensor.CPU(), []float64{1, 2, 3, 4, 5, 6}, 2, 3))
			require.NoError(t, autograd.Sum(autograd.Mul(y, up), false).Backward())
			require.InDeltaSlice(t, wantDx, x.Grad.Float64s(), 1e-12)
			require.InDeltaSlice(t, wantDw, ln.Weight.Grad.Float64s(), 1e-12)
			x.ZeroGrad()
			x.Value.Release()
		}
		ln.Weight.ZeroGrad()
	})
	require.Equal(t, []*nn.Parameter{ln.Weight}, ln.Parameters())

	// Neither weight nor bias (elementwise_affine=False): the plain
	// normalisation, and no parameters.
	plain := &nn.LayerNorm{Eps: 1e-5}
	require.Empty(t, plain.Parameters())
	tensor.WithScope(func() {
		x := autograd.Const(tensor.FromFloat64s(tensor.CPU(), []float64{1, 2, 4, -1, 0.5, 3}, 2, 3))
		var y *autograd.Var
		require.NoError(t, tensor.Try(func() { y = plain.Forward(x) }))
		require.InDeltaSlice(t, []float64{-1.069041531450298, -0.2672603828625746, 1.3363019143128718, -1.1111657580926075, -0.20203013783501955, 1.313195895927627}, y.Value.Float64s(), 1e-12)
	})
}
