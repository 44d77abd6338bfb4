package autograd_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestCausalAttentionHalfInputsNameTheOp: CausalAttention refuses bf16
// and fp16 q, k or v (its softmax runs in float32 and float64) with an
// *tensor.OpError naming autograd.CausalAttention and the dtype and
// pointing to FusedCausalAttention, wrapping tensor.ErrDType, before it
// allocates anything. The error named tensor.CausalSoftmax, an op the
// caller never called, after the half scores were made.
func TestCausalAttentionHalfInputsNameTheOp(t *testing.T) {
	c := tensor.NewCtx()
	s := c.NewScope()
	defer s.Close()
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		h := autograd.Const(c.Zeros(tensor.CPU(), dt, 1, 2, 4, 8))
		for i, name := range []string{"q", "k", "v"} {
			x := []*autograd.Var{h, h, h}
			if i > 0 { // one half operand among float32 ones
				f := autograd.Const(c.Zeros(tensor.CPU(), tensor.Float32, 1, 2, 4, 8))
				x = []*autograd.Var{f, f, f}
				x[i] = h
			}
			in := c.BytesInUse()
			err := tensor.Try(func() { autograd.CausalAttention(x[0], x[1], x[2], 0, 0, 0) })
			require.ErrorIs(t, err, tensor.ErrDType, "%v %s", dt, name)
			var oe *tensor.OpError
			require.True(t, errors.As(err, &oe), "%v %s: %v", dt, name, err)
			require.Equal(t, "autograd.CausalAttention", oe.Op, "%v %s: %v", dt, name, err)
			require.ErrorContains(t, err, name+" is "+dt.String(), "%v %s", dt, name)
			require.ErrorContains(t, err, "FusedCausalAttention", "%v %s", dt, name)
			require.Equal(t, in, c.BytesInUse(), "%v %s: nothing allocated", dt, name)
		}
	}
}
