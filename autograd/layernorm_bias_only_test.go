package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestLayerNormBiasGradWithoutWeight: LayerNorm(x, nil, b) must give b its
// gradient (the column sums of the output gradient), as F.layer_norm does.
//
//	x = torch.tensor([0.5,2,2,1,2,3], dtype=torch.float64).reshape(2,3).requires_grad_()
//	b = torch.tensor([0.1,-0.2,0.3], dtype=torch.float64).requires_grad_()
//	c = torch.tensor([1,2,3,4,5,6.], dtype=torch.float64).reshape(2,3)
//	(F.layer_norm(x, (3,), None, b, 1e-5) * c).sum().backward()
//	b.grad -> [5.0, 7.0, 9.0]
func TestLayerNormBiasGradWithoutWeight(t *testing.T) {
	tensor.WithScope(func() { layerNormBiasGradWithoutWeight(t) })
}

func layerNormBiasGradWithoutWeight(t *testing.T) {
	x := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{0.5, 2, 2, 1, 2, 3}, 2, 3), "x")
	b := autograd.Param(tensor.FromFloat64s(tensor.CPU(), []float64{0.1, -0.2, 0.3}, 3), "b")
	defer x.Value.Release() // parameters outlive scopes
	defer b.Value.Release()
	c := autograd.Const(tensor.FromFloat64s(tensor.CPU(), []float64{1, 2, 3, 4, 5, 6}, 2, 3))
	for _, ln := range []func(x, w, b *autograd.Var, eps float64) *autograd.Var{autograd.LayerNorm, autograd.LayerNormHalf} {
		x.ZeroGrad()
		b.ZeroGrad()
		defer x.ZeroGrad()
		defer b.ZeroGrad()
		y := ln(x, nil, b, 1e-5)
		require.InDeltaSlice(t, []float64{-1.3141994204495997, 0.5070997102248003, 1.0070997102248003, -1.1247356859083901, -0.2, 1.5247356859083903}, y.Value.Float64s(), 1e-12)
		require.NoError(t, autograd.Sum(autograd.Mul(y, c), false).Backward())
		require.NotNil(t, b.Grad, "b requires a gradient")
		require.InDeltaSlice(t, []float64{5, 7, 9}, b.Grad.Float64s(), 1e-12)
		require.NotNil(t, x.Grad)
	}
	require.NoError(t, autograd.GradCheck(func(v []*autograd.Var) *autograd.Var {
		return autograd.LayerNorm(v[0], nil, v[1], 1e-5)
	}, []*tensor.Tensor{x.Value, b.Value}, nil, 1e-6, 1e-7, 1e-6))
}
