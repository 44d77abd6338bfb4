package nn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestAttentionHeadsMustDivideWidth: a CausalSelfAttention built by hand
// with heads that do not divide its width (or none) fails with an
// *tensor.OpError naming the heads, in plain attention as in fused,
// instead of a reshape's error or a division by zero that tensor.Try does
// not catch.
func TestAttentionHeadsMustDivideWidth(t *testing.T) {
	for _, att := range []nn.Attention{nn.AttentionPlain, nn.AttentionFused} {
		for _, heads := range []int{5, 0, -2, 24} {
			a := &nn.CausalSelfAttention{
				CAttn: nn.Must(nn.NewLinear(nn.Options{}, "c_attn", 12, 36, true, 0.02)),
				CProj: nn.Must(nn.NewLinear(nn.Options{}, "c_proj", 12, 12, true, 0.02)),
				Heads: heads, AttnDrop: &nn.Dropout{}, ResidDrop: &nn.Dropout{}, Attention: att,
			}
			var err error
			require.NotPanics(t, func() {
				err = tensor.Try(func() {
					tensor.WithScope(func() {
						a.Forward(autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 1, 2, 12)))
					})
				})
			}, "%v attention, %d heads", att, heads)
			require.ErrorIs(t, err, tensor.ErrShape, "%v attention, %d heads", att, heads)
			require.ErrorContains(t, err, "heads", "%v attention, %d heads", att, heads)
			nn.Release(nn.Collect(a.CAttn, a.CProj))
		}
	}
}
