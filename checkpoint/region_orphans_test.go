package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestRegionReleasesOrphansOfClosedOverParameters: a checkpointed
// function that chains ops on parameters it closed over (their product,
// its tanh, a product of that with a parameter again) before meeting the
// caller's data. Those ops run on kept tensors alone, so their results
// are orphans owned by no scope until an op combines them with the
// caller's data, and only the last of the chain ever was: the region's
// forward pass dropped its graph with its scope and left the others to
// the garbage collector's safety net (the package's leak check counted
// them; the CPU's bytes stayed in use). With and without a policy, with
// the chain's start computed inside or closed over from outside; the
// gradients are the plain graph's.
func TestRegionReleasesOrphansOfClosedOverParameters(t *testing.T) {
	cpu := tensor.CPU()
	a := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "a")
	b := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "b")
	defer func() { a.Value.Release(); b.Value.Release() }()
	inUse := cpu.Memory().InUse()
	for name, policy := range map[string]checkpoint.Policy{"plain": nil, "selective": checkpoint.SaveMatMuls} {
		for _, outside := range []bool{false, true} {
			grads := map[bool][][]float32{}
			for _, ckpt := range []bool{false, true} {
				c := tensor.NewCtx()
				var err error
				c.WithScope(func() {
					x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
					var tab *autograd.Var
					if outside {
						tab = autograd.MatMul(a, b)
					}
					fn := func(in ...*autograd.Var) *autograd.Var {
						w := tab
						if w == nil {
							w = autograd.MatMul(a, b)
						}
						w = autograd.MatMul(autograd.Tanh(w), a)
						return autograd.Tanh(autograd.MatMul(in[0], w))
					}
					var y *autograd.Var
					if ckpt {
						y = checkpoint.Options{Policy: policy}.Apply(fn, x)
					} else {
						y = fn(x)
					}
					err = autograd.Sum(y, false).Backward()
				})
				require.NoError(t, err, "%s, outside %v, checkpointed %v", name, outside, ckpt)
				grads[ckpt] = [][]float32{a.Grad.Float32s(), b.Grad.Float32s()}
				a.ZeroGrad()
				b.ZeroGrad()
				require.Zero(t, c.BytesInUse())
				require.Equal(t, inUse, cpu.Memory().InUse(), "%s, outside %v, checkpointed %v: bytes left in use", name, outside, ckpt)
			}
			require.Equal(t, grads[false], grads[true], "%s, outside %v", name, outside)
		}
	}
}

// TestFailedBackwardReleasesClosedOverChain: a backward pass that fails
// before reaching a region whose function closed over a chain of ops on
// parameters alone (tanh of a product of two, computed before the
// region) leaves the region's node unstepped. The chain's values are
// orphans no scope owns (the region's node holds them, and the walk
// that adopts a graph's orphans does not go through a region), and were
// never released: the garbage collector's safety net took them.
func TestFailedBackwardReleasesClosedOverChain(t *testing.T) {
	cpu := tensor.CPU()
	a := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 2, 0.25}, 2, 2), "a")
	b := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "b")
	defer func() { a.ZeroGrad(); b.ZeroGrad(); a.Value.Release(); b.Value.Release() }()
	inUse := cpu.Memory().InUse()
	for _, policy := range []checkpoint.Policy{nil, checkpoint.SaveMatMuls} {
		c := tensor.NewCtx()
		var err error
		c.WithScope(func() {
			x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
			tab := autograd.Tanh(autograd.MatMul(a, b))
			y := checkpoint.Options{Policy: policy}.Apply(func(in ...*autograd.Var) *autograd.Var {
				return autograd.Tanh(autograd.MatMul(in[0], tab))
			}, x)
			failing := autograd.Record("Fail", y.Value.Alias(), []*autograd.Var{y}, func(*tensor.Tensor) []*tensor.Tensor {
				panic(&tensor.OpError{Op: "Fail", Msg: "injected", Err: tensor.ErrArgument})
			})
			err = autograd.Sum(failing, false).Backward()
		})
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Zero(t, c.BytesInUse())
		require.Equal(t, inUse, cpu.Memory().InUse(), "policy %v: bytes left in use", policy != nil)
	}
}
