package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// A half input of a checkpointed region takes its gradients inside in
// its consumers' layout, as a computed var does: the first one may be a
// view (a Transpose's, of the gradient that reached it), shared with
// what made it. A second gradient was then added into it in place
// through float32 (keepGrad's half path ran before the region's check),
// and CopyFrom refused the transposed view: Backward failed. The region
// must give what the plain graph gives, in either order of the uses, to
// Backward and to Grad (whose sum, regionSum, refused the half dtype).
func TestRegionSumsAHalfInputsGradients(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	table := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 3, 2), "table")
	defer table.Value.Release()
	for _, directFirst := range []bool{false, true} {
		var want []float32
		for _, ckpt := range []bool{false, true} {
			c.WithScope(func() {
				ones := autograd.Const(c.Ones(cpu, tensor.Float32, 3, 2))
				w := autograd.Const(c.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6}, 2, 3))
				f := func(in ...*autograd.Var) *autograd.Var {
					direct := autograd.Sum(autograd.Cast(in[0], tensor.Float32), false)
					transposed := autograd.Sum(autograd.Mul(autograd.Cast(autograd.Transpose(in[0], 0, 1), tensor.Float32), w), false)
					if directFirst {
						return autograd.Add(direct, transposed)
					}
					return autograd.Add(transposed, direct)
				}
				x := autograd.Cast(autograd.Mul(table, ones), tensor.BFloat16)
				var loss *autograd.Var
				if ckpt {
					loss = checkpoint.Apply(f, x)
				} else {
					loss = f(x)
				}
				gs, err := autograd.Grad(loss, []*autograd.Var{table}, autograd.GradOptions{BackwardOptions: autograd.BackwardOptions{RetainGraph: true}})
				require.NoError(t, err, "Grad, checkpointed %v", ckpt)
				require.NoError(t, loss.Backward(), "checkpointed %v", ckpt)
				got := table.Grad.Float32s()
				require.Equal(t, got, gs[0].Float32s(), "Grad, checkpointed %v", ckpt)
				table.ZeroGrad()
				if !ckpt {
					want = got
					require.Equal(t, []float32{2, 5, 3, 6, 4, 7}, want)
					return
				}
				require.Equal(t, want, got, "checkpointed, direct use first %v", directFirst)
			})
		}
	}
	require.Zero(t, c.BytesInUse())
}
