package tensor_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestCrossEntropyExtremeLogits: with logits so large that m + log s
// rounds log s away (m the row's max), the loss is (m - x[t]) + log s and
// the log-softmax (x - m) - log s, as PyTorch computes them (the CPU's
// float64 is checked against PyTorch in golden_ops' *_extreme cases too).
// PyTorch 1.13, float32:
//
//	x = torch.tensor([[3e38, 3e38, 0], [-3e38]*3, [1e16]*3, [1e20, 0, -1e20]])
//	F.cross_entropy(x, torch.tensor([0, 1, 2, 0]), reduction='none')
//	# [0.6931, 1.0986, 1.0986, 0.]
//	F.log_softmax(x, 1)
//	# [[-0.6931, -0.6931, -3e38], [-1.0986]*3, [-1.0986]*3, [0, -1e20, -2e20]]
func TestCrossEntropyExtremeLogits(t *testing.T) {
	ln2, ln3 := math.Log(2), math.Log(3)
	logits := []float64{3e38, 3e38, 0, -3e38, -3e38, -3e38, 1e16, 1e16, 1e16, 1e20, 0, -1e20}
	wantLoss := []float64{ln2, ln3, ln3, 0}
	wantLogSoftmax := []float64{-ln2, -ln2, -3e38, -ln3, -ln3, -ln3, -ln3, -ln3, -ln3, 0, -1e20, -2e20}
	third := 1.0 / 3
	wantGrad := []float64{-0.5, 0.5, 0, third, -2 * third, third, third, third, -2 * third, 0, 0, 0}
	near := func(t *testing.T, what string, want, got []float64) {
		t.Helper()
		require.Len(t, got, len(want), what)
		for i := range want {
			require.InDelta(t, want[i], got[i], 1e-6*math.Max(1, math.Abs(want[i])), "%s[%d]: %v", what, i, got)
		}
	}
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
			tensor.WithScope(func() {
				x := tensor.FromFloats(dev, dt, logits, 4, 3)
				targets := tensor.FromInt32s(dev, []int32{0, 1, 2, 0}, 4)
				loss, n := tensor.CrossEntropy(x, targets, -100)
				require.Equal(t, 4, n)
				near(t, dt.String()+" CrossEntropy", wantLoss, loss.ToDevice(tensor.CPU()).Float64s())
				fused, dx := tensor.CrossEntropyFused(x, 3, targets, tensor.Ones(dev, dt, 4), -100, dt)
				near(t, dt.String()+" CrossEntropyFused", wantLoss, fused.ToDevice(tensor.CPU()).Float64s())
				near(t, dt.String()+" CrossEntropyFused gradient", wantGrad, dx.ToDevice(tensor.CPU()).Float64s())
				near(t, dt.String()+" LogSoftmax", wantLogSoftmax, tensor.LogSoftmax(x).ToDevice(tensor.CPU()).Float64s())
			})
		}
	})
}
