package autograd_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestBackwardRefusesModifiedOperands: a tensor a backward reads, written
// in place between the forward and Backward, fails the pass with
// ErrModified naming the op and the operand (PyTorch raises there too);
// one the backward does not read may be written, as in PyTorch.
func TestBackwardRefusesModifiedOperands(t *testing.T) {
	cpu := tensor.CPU()
	vals := func() *tensor.Tensor { return tensor.FromFloat32s(cpu, []float32{1, 2, 3}, 3) }
	cases := []struct {
		name string
		// run builds a loss from a parameter x and a constant c, writes
		// something in place, and returns the loss.
		run  func(x, c *autograd.Var) *autograd.Var
		want string // "" when Backward must succeed, else in the error
	}{
		{"Mul reads c for x's gradient", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Mul(x, c)
			c.Value.Fill(5)
			return autograd.Sum(y, false)
		}, "input 1 (a constant) of Mul"},
		{"Mul does not read x when c needs no gradient", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Mul(x, c)
			x.Value.Fill(5)
			return autograd.Sum(y, false)
		}, ""},
		{"Add reads neither", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Add(x, c)
			c.Value.Fill(5)
			x.Value.ScaleInPlace(2)
			return autograd.Sum(y, false)
		}, ""},
		{"Exp reads its output", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Exp(x)
			y.Value.Fill(0)
			return autograd.Sum(y, false)
		}, "the output of Exp"},
		{"Tanh through a view of its output", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Tanh(x)
			y.Value.Narrow(0, 1, 1).MarkModified()
			return autograd.Sum(y, false)
		}, "the output of Tanh"},
		{"Log reads its input", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Log(x)
			x.Value.AddInPlace(c.Value)
			return autograd.Sum(y, false)
		}, "input 0 (x) of Log"},
		{"an optimizer step between forward and backward", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Mul(x, x)
			tensor.SGDStep(x.Value, vals(), nil, 0.1, 0, 0, false)
			return autograd.Sum(y, false)
		}, "input 0 (x) of Mul"},
		{"a step on what no backward reads", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.MatMul(autograd.Reshape(c, 1, 3), autograd.Reshape(x, 3, 1))
			y = autograd.Mul(y, y)
			tensor.SGDStep(x.Value, vals(), nil, 0.1, 0, 0, false)
			return autograd.Sum(y, false)
		}, ""}, // MatMul reads c, not x, for x's gradient (as PyTorch's mm saves)
		{"a custom op's saved tensor", func(x, c *autograd.Var) *autograd.Var {
			s := tensor.Mul(x.Value, x.Value)
			y := autograd.Record("Square", tensor.Mul(x.Value, x.Value), []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{tensor.Mul(g, tensor.Scale(x.Value, 2))}
			}, s)
			s.Fill(1)
			return autograd.Sum(y, false)
		}, "saved tensor 0 of Square"},
		{"a custom op's input", func(x, c *autograd.Var) *autograd.Var {
			y := autograd.Record("Square", tensor.Mul(x.Value, x.Value), []*autograd.Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
				return []*tensor.Tensor{tensor.Mul(g, tensor.Scale(x.Value, 2))}
			})
			x.Value.CopyFrom(c.Value)
			return autograd.Sum(y, false)
		}, "input 0 (x) of Square"},
	}
	for _, tc := range cases {
		tensor.WithScope(func() {
			x := autograd.Param(vals(), "x")
			defer x.Value.Release()
			c := autograd.Const(vals())
			var loss *autograd.Var
			require.NoError(t, tensor.Try(func() { loss = tc.run(x, c) }), tc.name)
			err := loss.Backward()
			if tc.want == "" {
				require.NoError(t, err, tc.name)
				require.NotNil(t, x.Grad, tc.name)
				x.ZeroGrad()
				return
			}
			require.ErrorIs(t, err, autograd.ErrModified, tc.name)
			var oe *tensor.OpError
			require.ErrorAs(t, err, &oe, tc.name)
			require.Contains(t, err.Error(), tc.want, tc.name)
			require.Contains(t, err.Error(), "version 1", tc.name)
			require.Nil(t, x.Grad, "%s: no gradient reaches x", tc.name)
		})
	}
}

// TestEmbeddingAndCrossEntropyKeepTheirIndices: the ids and targets may be
// released right after the forward (backward holds its own reference),
// with the gradients of a run that kept them; written in place instead,
// they fail the pass.
func TestEmbeddingAndCrossEntropyKeepTheirIndices(t *testing.T) {
	cpu := tensor.CPU()
	grads := func(release, overwrite bool) ([]float32, error) {
		var out []float32
		var err error
		tensor.WithScope(func() {
			table := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, 3, 2), "table")
			defer table.Value.Release()
			ids := tensor.FromInt32s(cpu, []int32{2, 0, 2}, 3)
			targets := tensor.FromInt32s(cpu, []int32{1, 0, 1}, 3)
			logits := autograd.Embedding(table, ids)
			loss := autograd.CrossEntropy(logits, targets)
			switch {
			case release:
				ids.Release()
				targets.Release()
			case overwrite:
				ids.CopyFrom(tensor.FromInt32s(cpu, []int32{0, 0, 0}, 3))
			}
			if err = loss.Backward(); err == nil {
				out = table.Grad.Float32s()
				table.ZeroGrad()
			}
		})
		return out, err
	}
	want, err := grads(false, false)
	require.NoError(t, err)
	got, err := grads(true, false)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = grads(false, true)
	require.ErrorIs(t, err, autograd.ErrModified)
	require.Contains(t, err.Error(), "saved tensor 0 of Embedding")
}

// TestLeaves: the leaves a graph reaches, each once, without going past
// the stop vars.
func TestLeaves(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		w := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2}, 2), "w")
		defer w.Value.Release()
		c := autograd.Const(tensor.FromFloat32s(cpu, []float32{3, 4}, 2))
		h := autograd.Mul(w, c)
		y := autograd.Add(autograd.Mul(h, w), h)
		require.ElementsMatch(t, []*autograd.Var{w, c}, y.Leaves())
		require.ElementsMatch(t, []*autograd.Var{w}, y.Leaves(h))
		require.Empty(t, y.Leaves(y))
		require.Equal(t, []*autograd.Var{w}, w.Leaves())
		require.Nil(t, (*autograd.Var)(nil).Leaves())
	})
}

// TestNoFalseModified: operands a backward does not read may be written
// in place, as in PyTorch: GeluLinear's input when only the bias needs a
// gradient, CausalAttention's v when only v needs one; the gradients are
// those of a run without the write.
func TestNoFalseModified(t *testing.T) {
	cpu := tensor.CPU()
	c := tensor.NewCtx()
	vals := func(n int, shape ...int) *tensor.Tensor {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7)/7 - 0.4
		}
		return c.FromFloat32s(cpu, v, shape...)
	}
	run := func(write bool) ([]float32, []float32) {
		var gb, gv []float32
		c.WithScope(func() {
			u := autograd.Const(vals(6, 2, 3))
			w := autograd.Const(vals(12, 4, 3))
			b := autograd.Param(vals(4, 4), "b")
			y := autograd.GeluLinear(u, w, b)
			q := autograd.Const(vals(8, 1, 1, 2, 4))
			k := autograd.Const(vals(8, 1, 1, 2, 4))
			v := autograd.Param(vals(8, 1, 1, 2, 4), "v")
			a := autograd.CausalAttention(q, k, v, 0, 0, 0)
			if write {
				u.Value.Fill(3)
				v.Value.ScaleInPlace(2)
			}
			loss := autograd.Add(autograd.Sum(y, false), autograd.Sum(autograd.Mul(a, a), false))
			require.NoError(t, loss.Backward())
			gb, gv = b.Grad.Float32s(), v.Grad.Float32s()
			b.ZeroGrad()
			v.ZeroGrad()
			b.Value.Release()
			v.Value.Release()
		})
		return gb, gv
	}
	gb, gv := run(false)
	gb2, gv2 := run(true)
	require.Equal(t, gb, gb2)
	require.Equal(t, gv, gv2, "v's gradient reads the probabilities and the output gradient only")
}
