package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainOverlap trains a small GPT for a few steps with AdamW, its update
// overlapped or not, and returns the losses and the final weights.
func trainOverlap(t *testing.T, dev tensor.Device, prec amp.State, overlap bool) ([]float64, [][]float32) {
	t.Helper()
	return trainAdamW(t, dev, prec, trainRun{maxNorm: 1, optimizer: func(opt *nn.AdamW) { opt.Overlap = overlap }})
}

// TestAdamWOverlapSameBits: an overlapped optimizer gives the losses and
// weights of the plain one, bit for bit; on a GPU the next forward pass
// runs while the update is still being queued on the side stream.
func TestAdamWOverlapSameBits(t *testing.T) {
	check := func(t *testing.T, dev tensor.Device, prec amp.State) {
		l0, w0 := trainOverlap(t, dev, prec, false)
		l1, w1 := trainOverlap(t, dev, prec, true)
		require.Equal(t, l0, l1, "losses")
		require.Equal(t, w0, w1, "weights")
	}
	onCPUAndCUDA(t, check)
}
