package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestLinearCrossEntropyHalfOperands: outside autocast the fused head
// takes bfloat16 and float16 h and w as they are (half products and
// logits, a float32 loss), and differentiates them: the gradients, in
// h's and w's dtype, are the float32 head's on the same values within
// half-precision rounding. Backward failed with tensor.Mul's dtype error
// ("operands bfloat16 [6 4] and float32 [1 1]"): the half gradients
// the forward made were scaled by the float32 incoming gradient as they
// were.
func TestLinearCrossEntropyHalfOperands(t *testing.T) {
	t.Run("plain", testLinearCrossEntropyHalfOperands)
	t.Run("padded", func(t *testing.T) {
		defer autograd.PadHeadAlways()()
		testLinearCrossEntropyHalfOperands(t)
	})
}

func testLinearCrossEntropyHalfOperands(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const B, T, C, V = 2, 3, 4, 7
	tensor.WithScope(func() {
		hv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 1, B, T, C)
		wv := tensor.RandN(tensor.CPU(), tensor.Float32, rng, 0.5, V, C)
		tgt := tensor.FromInt32s(tensor.CPU(), []int32{0, 6, autograd.IgnoreIndex, 2, 5, 1}, B, T)
		run := func(dt tensor.DType) (loss float64, gh, gw []float64) {
			h := autograd.Param(hv.To(dt), "h")
			w := autograd.Param(wv.To(dt), "w")
			defer done(h, w)
			l := autograd.LinearCrossEntropy(h, w, tgt, 4)
			require.NoError(t, l.Backward(), "%v", dt)
			require.Equal(t, dt, h.Grad.DType())
			require.Equal(t, dt, w.Grad.DType())
			return l.Item(), h.Grad.Float64s(), w.Grad.Float64s()
		}
		for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
			hv32, wv32 := hv.To(dt).To(tensor.Float32), wv.To(dt).To(tensor.Float32) // the half values in float32
			h, w := autograd.Param(hv32, "h32"), autograd.Param(wv32, "w32")
			l := autograd.LinearCrossEntropy(h, w, tgt, 4)
			require.NoError(t, l.Backward())
			wantL, wantH, wantW := l.Item(), h.Grad.Float64s(), w.Grad.Float64s()
			done(h, w)

			gotL, gotH, gotW := run(dt)
			assert.InDelta(t, wantL, gotL, 2e-2, "%v: loss", dt)
			assert.InDeltaSlice(t, wantH, gotH, 2e-2, "%v: dh", dt)
			assert.InDeltaSlice(t, wantW, gotW, 2e-2, "%v: dw", dt)
		}
	})
}
