package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestRepeatedInput: an input passed twice (Apply(fn, x, x)) is one leaf
// in the recomputation, as it is one var in the plain graph, so its
// gradient adds its uses up in the plain run's order: bit for bit the
// plain run's, with every kind of region. (Two leaves used to return two
// partial sums, which the engine then added: another grouping.)
func TestRepeatedInput(t *testing.T) {
	n := newNet(11)
	defer n.release()
	f := func(a, b *autograd.Var) *autograd.Var { return autograd.Add(n.block(a), n.block(b)) }
	for _, inputGrad := range []bool{true, false} {
		c := tensor.NewCtx()
		autograd.SetRandomState(c, 100)
		want := run(t, c, n, inputGrad, func(x *autograd.Var) *autograd.Var { return f(x, x) })
		for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
			c := tensor.NewCtx()
			autograd.SetRandomState(c, 100)
			got := run(t, c, n, inputGrad, func(x *autograd.Var) *autograd.Var {
				return o.Apply(func(in ...*autograd.Var) *autograd.Var { return f(in[0], in[1]) }, x, x)
			})
			sameBits(t, want, got, "an input passed twice")
			require.Zero(t, c.BytesInUse())
		}
	}
}
