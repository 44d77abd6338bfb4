package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// A function that returns nil makes Apply return nil with nothing
// recorded, and frees what its policy saved on the way: those outputs are
// kept out of every scope, and nothing else would ever release them (they
// leaked, 16 bytes here).
func TestNilResult(t *testing.T) {
	w := tensor.FromFloat64s(tensor.CPU(), []float64{0.1, -0.2, 0.3, 0.4, 0.5, -0.6}, 3, 2)
	tensor.Keep(w)
	defer w.Release()
	p := autograd.Param(w, "w")
	mem := tensor.CPU().Memory()
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Policy: checkpoint.SaveMatMuls, Offload: &checkpoint.Offload{Keep: -1}}} {
		before := mem.InUse()
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat64s(tensor.CPU(), []float64{1, 2, 3}, 1, 3))
			y := o.Apply(func(in ...*autograd.Var) *autograd.Var {
				autograd.Tanh(autograd.MatMul(in[0], in[1]))
				return nil
			}, x, p)
			require.Nil(t, y)
		})
		require.Zero(t, c.BytesInUse())
		require.Equal(t, before, mem.InUse(), "policy %v: bytes left behind", o.Policy != nil)
	}
	require.Nil(t, p.Grad)
}
