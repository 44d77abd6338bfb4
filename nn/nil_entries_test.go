package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestListHelpersSkipNilEntries: a parameter list written by hand from a
// bias-less Linear holds its nil Bias. The list functions that return an
// error refuse it (TrainStep, ClipGradNorm, the optimizers, the weight
// files); ZeroGrad, Release and CountParams, which cannot, skip it as
// Collect skips a nil module, instead of a nil-pointer panic that left
// the rest of the list unreleased (a deferred Release).
func TestListHelpersSkipNilEntries(t *testing.T) {
	fc := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 3, false, 0))
	out := nn.Must(nn.NewLinear(nn.Options{}, "out", 3, 1, true, 0))
	ps := []*nn.Parameter{fc.Weight, fc.Bias, out.Weight, out.Bias, {}}
	require.Nil(t, fc.Bias)

	tensor.WithScope(func() {
		x := autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2}, 1, 2))
		require.NoError(t, autograd.Sum(out.Forward(fc.Forward(x)), false).Backward())
	})
	require.NotNil(t, out.Weight.Grad)
	require.NotPanics(t, func() { assert.Equal(t, 6+3+1, nn.CountParams(ps)) })
	require.NotPanics(t, func() { nn.ZeroGrad(ps) })
	assert.Nil(t, fc.Weight.Grad)
	assert.Nil(t, out.Weight.Grad)
	require.NotPanics(t, func() { nn.Release(ps) })
	for _, p := range []*nn.Parameter{fc.Weight, out.Weight, out.Bias} {
		assert.True(t, p.Value.Released(), p.Name)
	}
}

// TestCollectSkipsNilPointerModules: an optional layer left nil reaches
// Collect as a nil pointer in the Module interface, not a nil interface.
// Collect skips it as it skips a nil module, instead of calling its
// Parameters, which crashed with a nil-pointer panic (and with it
// MLP.Parameters of an MLP literal without its projection).
func TestCollectSkipsNilPointerModules(t *testing.T) {
	fc := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 3, true, 0))
	defer nn.Release(fc.Parameters())
	var head *nn.Linear // optional, not built
	var norm *nn.LayerNorm
	var ps []*nn.Parameter
	require.NotPanics(t, func() { ps = nn.Collect(fc, head, norm, nil) })
	assert.Equal(t, fc.Parameters(), ps)
	require.NotPanics(t, func() { ps = (&nn.MLP{FC: fc}).Parameters() })
	assert.Equal(t, fc.Parameters(), ps)
}

// TestLayersWithoutWeightAreOpErrors: a Linear or an Embedding written as
// a literal without its Weight (or a nil one), run directly, inside an MLP
// or a block's attention, panics with an *tensor.OpError wrapping
// tensor.ErrArgument, which tensor.Try returns, as a Block missing a
// sublayer does; reading the missing weight's var was a nil-pointer panic
// that tensor.Try passes on.
func TestLayersWithoutWeightAreOpErrors(t *testing.T) {
	fc := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 8, true, 0))
	defer nn.Release(fc.Parameters())
	ids := func() *tensor.Tensor { return tensor.FromInt32s(tensor.CPU(), []int32{0, 1}, 2) }
	attn := &nn.CausalSelfAttention{CAttn: &nn.Linear{}, CProj: &nn.Linear{}, Heads: 1}
	for name, fn := range map[string]func(x *autograd.Var){
		"Linear literal":         func(x *autograd.Var) { (&nn.Linear{}).Forward(x) },
		"nil Linear":             func(x *autograd.Var) { (*nn.Linear)(nil).Forward(x) },
		"Linear ForwardHalf":     func(x *autograd.Var) { (&nn.Linear{}).ForwardHalf(x) },
		"MLP without projection": func(x *autograd.Var) { (&nn.MLP{FC: fc, Proj: &nn.Linear{}}).Forward(x) },
		"MLP without c_fc":       func(x *autograd.Var) { (&nn.MLP{Proj: fc}).Forward(x) },
		"attention":              func(x *autograd.Var) { attn.Forward(autograd.Reshape(x, 1, 1, 2)) },
		"Embedding literal":      func(*autograd.Var) { (&nn.Embedding{}).Forward(ids()) },
		"nil Embedding":          func(*autograd.Var) { (*nn.Embedding)(nil).Forward(ids()) },
	} {
		var err error
		require.NotPanics(t, func() {
			err = tensor.Try(func() {
				tensor.WithScope(func() {
					fn(autograd.Const(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2}, 1, 2)))
				})
			})
		}, name)
		require.ErrorIs(t, err, tensor.ErrArgument, name)
		require.ErrorContains(t, err, "no Weight", name)
	}
}
