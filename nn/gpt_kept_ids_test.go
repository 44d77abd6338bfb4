package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestGPTKeptIds: ids that belong to no context (tensor.NewKept) are
// refused with an error saying what to pass, where the whole pass used to
// run outside the caller's context (its autocast region, grad mode and
// scope ignored, what it made leaked); adopted into the context, the same
// ids follow its autocast region and grad mode, and steps that fail leave
// nothing behind.
func TestGPTKeptIds(t *testing.T) {
	mem := tensor.CPU().Memory()
	cfg := nn.GPTConfig{Vocab: 11, Context: 8, Layers: 1, Heads: 2, Width: 8}
	g, err := nn.NewGPT(cfg, nn.Options{Rng: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	ps := g.Parameters()
	defer nn.Release(ps)
	kept := func(v float64) *tensor.Tensor {
		k, err := tensor.NewKept(tensor.CPU(), tensor.Int32, memory.RoleActivation, 1, 4)
		require.NoError(t, err)
		k.Fill(v)
		return k
	}
	xk, yk := kept(1), kept(2)
	defer xk.Release()
	defer yk.Release()
	c := tensor.NewCtx()

	err = tensor.Try(func() { g.Loss(xk, yk) })
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.ErrorContains(t, err, "ids belong to no context")

	before := mem.InUse()
	opt := nn.NewAdamW(ps, 1e-3, 0)
	defer opt.Release()
	for range 3 {
		_, err := nn.TrainStep(c, ps, opt, func() *autograd.Var { return g.Loss(xk, yk) })
		require.ErrorIs(t, err, tensor.ErrArgument)
	}
	require.Equal(t, before, mem.InUse(), "the refused steps leave nothing behind")

	c.WithScope(func() {
		x, y := c.Adopt(xk.Alias()), c.Adopt(yk.Alias())
		l32 := g.Loss(x, y).Item()
		var l16 float64
		amp.With(c, amp.State{Enabled: true, DType: tensor.BFloat16}, func() { l16 = g.Loss(x, y).Item() })
		require.NotEqual(t, l32, l16, "the bf16 autocast region applies")
		autograd.NoGradIn(c, func() { require.False(t, g.Loss(x, y).RequiresGrad(), "NoGradIn(c) records no graph") })
	})
	require.Zero(t, c.BytesInUse())
}
