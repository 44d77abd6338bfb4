package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestMeanBackwardDivides: Mean's gradient is the output gradient divided
// by the element count, as PyTorch's mean backward (grad.expand(...) / n),
// not multiplied by a rounded 1/n (an ulp off: 5 * float32(1/3) is
// 1.6666667, 5/3 is 1.6666666). The golden values are PyTorch 1.13's:
//
//	x = torch.full((2, 3), 7., dtype=dt, requires_grad=True)
//	x.mean(1).backward(torch.tensor([5., 7.], dtype=dt)); x.grad
func TestMeanBackwardDivides(t *testing.T) {
	for _, c := range []struct {
		dt   tensor.DType
		want []float64
	}{
		{tensor.Float32, []float64{1.6666666269302368, 2.3333332538604736}},
		{tensor.Float64, []float64{1.6666666666666667, 2.3333333333333335}},
	} {
		tensor.WithScope(func() {
			x := autograd.Param(tensor.Full(tensor.CPU(), c.dt, 7, 2, 3), "x")
			defer func() {
				x.Value.Release()
				x.Grad.Release()
			}()
			m := autograd.Mean(x, false, 1)
			require.NoError(t, m.BackwardWith(tensor.FromFloats(tensor.CPU(), c.dt, []float64{5, 7})))
			g := x.Grad.Float64s()
			for i, w := range c.want {
				for j := range 3 {
					require.Equal(t, w, g[i*3+j], "%v grad[%d, %d]", c.dt, i, j)
				}
			}
		})
	}
}
