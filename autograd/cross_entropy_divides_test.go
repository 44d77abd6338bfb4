package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestCrossEntropyDivides: the mean cross-entropy divides its sum by the
// count of counted targets, and the incoming gradient by it, as PyTorch's
// nll_loss does, not multiplied by a rounded 1/n (seven float32 ln 2 times
// float32(1/7) is 0.69314724, an ulp off PyTorch's 0.6931472). The fused
// head (LinearCrossEntropy with zero weights: the same zero logits) does
// the same, on the CPU and on CUDA. PyTorch 1.13's values:
//
//	x = torch.zeros(8, 2, dtype=dt, requires_grad=True)
//	t = torch.tensor([0, 1, 0, 1, 0, 1, 0, -100])
//	l = F.cross_entropy(x, t); l.backward(torch.tensor(5., dtype=dt))
func TestCrossEntropyDivides(t *testing.T) {
	for _, c := range []struct {
		dt    tensor.DType
		torch []float64 // loss, x.grad[0]
	}{
		{tensor.Float32, []float64{0.6931471824645996, -0.3571428656578064, 0.3571428656578064}},
		{tensor.Float64, []float64{0.6931471805599453, -0.35714285714285715, 0.35714285714285715}},
	} {
		for _, d := range []struct {
			name string
			dev  func(*testing.T) tensor.Device
		}{{"cpu", func(*testing.T) tensor.Device { return tensor.CPU() }}, {"cuda", attnGPU}} {
			t.Run(c.dt.String()+"/"+d.name, func(t *testing.T) {
				dev := d.dev(t)
				tensor.WithScope(func() {
					targets := tensor.FromInt32s(dev, []int32{0, 1, 0, 1, 0, 1, 0, autograd.IgnoreIndex}, 8)
					x0 := tensor.Zeros(dev, c.dt, 8, 2)
					// The sum of the rows' losses over 7, and the rows'
					// gradients for the incoming 5 over 7, each rounded once.
					rows, n := tensor.CrossEntropy(x0, targets, autograd.IgnoreIndex)
					require.Equal(t, 7, n)
					sum := tensor.Sum(rows, false).Item()
					wantLoss := tensor.Div(tensor.Full(dev, c.dt, sum), tensor.Full(dev, c.dt, 7)).Item()
					e := tensor.Div(tensor.Full(dev, c.dt, 5, 8), tensor.Full(dev, c.dt, 7, 8))
					wantGrad := tensor.CrossEntropyBackward(x0, targets, e, autograd.IgnoreIndex).Float64s()
					// The fused head computes the rows' gradients for 1 in its
					// forward pass and scales them by 5/7 in backward.
					ones := tensor.Full(dev, c.dt, 1, 8)
					d1 := tensor.CrossEntropyBackward(x0, targets, ones, autograd.IgnoreIndex)
					wantFused := tensor.Mul(d1, e.Narrow(0, 0, 1).Reshape(1, 1)).Float64s()

					check := func(name string, loss *autograd.Var, want []float64, grad func() []float64) {
						require.Equal(t, wantLoss, loss.Value.Item(), "%s loss", name)
						require.Equal(t, c.torch[0], loss.Value.Item(), "%s loss against torch", name)
						require.NoError(t, loss.BackwardWith(tensor.Full(dev, c.dt, 5)))
						g := grad()
						require.Equal(t, want[:2], g[:2], "%s row 0", name)
						require.Equal(t, []float64{0, 0}, g[14:], "%s ignored row", name)
						require.Equal(t, c.torch[1:], g[:2], "%s row 0 against torch", name)
					}
					var params []*autograd.Var
					defer func() {
						for _, p := range params {
							p.Value.Release()
							p.Grad.Release()
						}
					}()
					x := autograd.Param(x0.Clone(), "x")
					params = append(params, x)
					check("CrossEntropy", autograd.CrossEntropy(x, targets), wantGrad, func() []float64 { return x.Grad.Float64s() })

					// The fused head: logits h @ w^T are zero with w zero, and
					// w's gradient is dlogits^T @ h: with h one-hot in row 0's
					// first feature, w's gradient column 0 is row 0's dlogits.
					hv := make([]float64, 8*4)
					hv[0] = 1
					h := autograd.Param(tensor.FromFloats(dev, c.dt, hv, 8, 4), "h")
					w := autograd.Param(tensor.Zeros(dev, c.dt, 2, 4), "w")
					params = append(params, h, w)
					check("LinearCrossEntropy", autograd.LinearCrossEntropy(h, w, targets, 0), wantFused, func() []float64 {
						gw := w.Grad.Float64s()
						g := make([]float64, 16)
						for k := range 2 {
							g[k] = gw[k*4]
						}
						return g
					})
				})
			})
		}
	}
}
