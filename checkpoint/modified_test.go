package checkpoint_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// TestModifiedBeforeRecomputation: a parameter the checkpointed function
// closes over, or an input of the region, written in place between the
// forward pass and Backward fails the pass with autograd.ErrModified (the
// recomputation would not repeat the forward pass: the gradients would be
// taken at the new values in silence), with every kind of region; left
// alone, the pass succeeds.
func TestModifiedBeforeRecomputation(t *testing.T) {
	cpu := tensor.CPU()
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
		for _, write := range []string{"", "parameter", "input", "constant"} {
			c := tensor.NewCtx()
			w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "w")
			var err error
			c.WithScope(func() {
				k := autograd.Const(c.FromFloat32s(cpu, []float32{0.5, 0.5}, 2))
				x := autograd.Param(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2), "x")
				two := autograd.Const(c.FromFloat32s(cpu, []float32{2, 2, 2, 2}, 2, 2))
				h := autograd.Mul(x, two) // an input with a graph of its own below the region, in c
				y := o.Apply(func(in ...*autograd.Var) *autograd.Var {
					return autograd.Mul(autograd.Tanh(autograd.MatMul(in[0], w)), k)
				}, h)
				switch write {
				case "parameter":
					tensor.SGDStep(w.Value, c.FromFloat32s(cpu, []float32{1, 1, 1, 1}, 2, 2), nil, 0.1, 0, 0, false)
				case "input":
					h.Value.ScaleInPlace(3)
				case "constant":
					k.Value.Fill(2)
				}
				err = autograd.Sum(y, false).Backward()
				x.ZeroGrad()
				x.Value.Release()
			})
			if write == "" {
				require.NoError(t, err, "%+v", o)
				require.NotNil(t, w.Grad)
			} else {
				require.ErrorIs(t, err, autograd.ErrModified, "%s written, %+v", write, o)
				require.Contains(t, err.Error(), map[string]string{"parameter": "w (float32 [2 2]), which", "input": "input 0 (Mul) of Checkpoint", "constant": "a constant (float32 [2]), which"}[write])
				require.Nil(t, w.Grad)
			}
			w.ZeroGrad()
			w.Value.Release()
			require.Zero(t, c.BytesInUse(), "%s written, %+v", write, o)
		}
	}
}

// TestClosedOverIdsRewritten: ids a checkpointed Embedding closes over (a
// tensor, not a var), written in place before Backward, fail the pass as
// without checkpointing; the region's own intermediates are not held for
// the check.
func TestClosedOverIdsRewritten(t *testing.T) {
	cpu := tensor.CPU()
	for _, write := range []bool{false, true} {
		c := tensor.NewCtx()
		table := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2), "table")
		var err error
		var held, plain int64
		c.WithScope(func() {
			ids := c.FromInt32s(cpu, []int32{0, 1}, 2)
			block := func(in ...*autograd.Var) *autograd.Var {
				return autograd.Tanh(autograd.Exp(autograd.Embedding(in[0], ids)))
			}
			// The region's input in c, so that the region runs in c.
			x := autograd.Mul(table, autograd.Const(c.Full(cpu, tensor.Float32, 1, 4, 2)))
			before := c.BytesInUse()
			y := checkpoint.Apply(block, x)
			held = c.BytesInUse() - before
			c.WithScope(func() {
				autograd.NoGradIn(c, func() { plain = block(x).Value.Bytes() })
			})
			if write {
				ids.CopyFrom(c.FromInt32s(cpu, []int32{2, 3}, 2))
			}
			err = autograd.Sum(y, false).Backward()
		})
		require.Equal(t, plain, held, "the region holds its result only")
		if write {
			require.ErrorIs(t, err, autograd.ErrModified)
			require.ErrorContains(t, err, "a tensor (int32 [2]) the checkpointed function read is at version 1")
		} else {
			require.NoError(t, err)
		}
		table.ZeroGrad()
		table.Value.Release()
		require.Zero(t, c.BytesInUse())
	}
}

// TestReadChecksHoldNothingAfterBackward: the views checkClosed keeps of
// what a region's backward reads hold no region input or policy-saved
// output past the region's backward: after Backward of four chained
// regions, the context holds the input, the loss and the weights'
// gradients only, as before the checks existed (they held every block
// input until the scope closed).
func TestReadChecksHoldNothingAfterBackward(t *testing.T) {
	cpu := tensor.CPU()
	rng := rand.New(rand.NewPCG(3, 4))
	var ws []*autograd.Var
	for i := range 4 {
		ws = append(ws, autograd.Param(tensor.RandN(cpu, tensor.Float32, rng, 0.1, 64, 64), fmt.Sprintf("w%d", i)))
	}
	defer func() {
		for _, w := range ws {
			w.ZeroGrad()
			w.Value.Release()
		}
	}()
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}} {
		c := tensor.NewCtx()
		c.WithScope(func() {
			x := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 64, 64))
			h := x
			for _, w := range ws {
				h = o.Apply(func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.MatMul(in[0], w)) }, h)
			}
			loss := autograd.Sum(h, false)
			require.NoError(t, loss.Backward())
			grads := int64(0) // made in c, kept out of its scopes
			for _, w := range ws {
				grads += w.Grad.Bytes()
			}
			require.Equal(t, x.Value.Bytes()+loss.Value.Bytes()+grads, c.BytesInUse(), "%+v: held after Backward", o)
			for _, w := range ws {
				w.ZeroGrad()
			}
		})
		require.Zero(t, c.BytesInUse())
	}
}
