package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestReluBackwardAtNaN: a NaN input passes its gradient through Relu, as
// PyTorch's threshold_backward does (0 only where y <= 0); it was 0, which
// hid the NaN from the gradient. PyTorch 1.13:
//
//	x = torch.tensor([nan, -1., 0., 2.], requires_grad=True)
//	torch.relu(x).backward(torch.ones(4)); x.grad  # tensor([1., 0., 0., 1.])
func TestReluBackwardAtNaN(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			tensor.WithScope(func() {
				x := tensor.FromFloats(dev, dt, []float64{math.NaN(), -1, 0, 2}, 4)
				y := tensor.Relu(x)
				g := tensor.UnaryBackward(tensor.OpRelu, x, y, tensor.Ones(dev, dt, 4))
				require.Equal(t, []float64{1, 0, 0, 1}, g.ToDevice(tensor.CPU()).Float64s(), "%v", dt)
			})
		}
	})
}
