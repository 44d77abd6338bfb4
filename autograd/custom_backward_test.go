package autograd_test

// A custom op (Record) whose backward function is buggy: Backward returns
// an *tensor.OpError naming the op and the problem, and leaves the graph
// as a pass that failed midway does (failed_pass_test.go). It used to
// panic with a plain string.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

func TestBuggyCustomBackwardIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  func(g, x *tensor.Tensor) []*tensor.Tensor
		err  error
	}{
		{"wrong shape", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Sum(g, false), tensor.Scale(g, 1)}
		}, tensor.ErrShape},
		{"wrong shape second", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Scale(g, 2), tensor.Sum(g, false)}
		}, tensor.ErrShape},
		{"too few", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Scale(g, 2)}
		}, tensor.ErrArgument},
		{"too many", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Scale(g, 2), tensor.Scale(g, 1), tensor.Scale(g, 1)}
		}, tensor.ErrArgument},
		{"none", func(*tensor.Tensor, *tensor.Tensor) []*tensor.Tensor { return nil }, tensor.ErrArgument},
		{"integer", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Scale(g, 2), g.To(tensor.Int32)}
		}, tensor.ErrDType},
		{"released", func(g, _ *tensor.Tensor) []*tensor.Tensor {
			r := tensor.Scale(g, 2)
			r.Release()
			return []*tensor.Tensor{tensor.Scale(g, 2), r}
		}, tensor.ErrReleased},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tensor.NewCtx()
			c.WithScope(func() {
				x := leaf64(c, []float64{1, 2, 3}, 3)
				defer x.ZeroGrad()
				y := leaf64(c, []float64{4, 5, 6}, 3)
				defer y.ZeroGrad()
				z := leaf64(c, []float64{7, 8, 9}, 3)
				defer z.ZeroGrad()
				h := autograd.Scale(x, 2)
				// custom(h, y) = 2h + y, with a buggy backward.
				custom := autograd.Record("double", tensor.Add(tensor.Scale(h.Value, 2), y.Value),
					[]*autograd.Var{h, y}, func(g *tensor.Tensor) []*tensor.Tensor { return tc.bad(g, x.Value) })
				// z's path steps first (it is later in the topological
				// order), then the custom op fails.
				l := autograd.Add(autograd.Sum(custom, false), autograd.Sum(autograd.Mul(z, h), false))
				var err error
				require.NotPanics(t, func() { err = l.Backward() })
				require.ErrorIs(t, err, tc.err)
				var oe *tensor.OpError
				require.ErrorAs(t, err, &oe)
				require.Contains(t, err.Error(), "double")
				t.Log(err)
				// z's share arrived before the failure; y got nothing
				// from the failed node (not even its good gradient).
				require.Equal(t, []float64{2, 4, 6}, z.Grad.Float64s())
				require.Nil(t, y.Grad)
				require.Nil(t, x.Grad)
				x.ZeroGrad()

				// h's graph was not consumed: a later pass through it
				// starts from no gradient.
				require.NoError(t, autograd.Sum(h, false).Backward())
				require.Equal(t, []float64{2, 2, 2}, x.Grad.Float64s())
			})
			require.Zero(t, c.BytesInUse())
		})
	}
}

// The case from the review: a one-input custom op whose backward returns
// a scalar.
func TestCustomBackwardWrongShapeReview(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		v := leaf64(c, []float64{1, 2, 3}, 3)
		defer v.ZeroGrad()
		d := autograd.Record("double", tensor.Scale(v.Value, 2), []*autograd.Var{v}, func(g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.Sum(g, false)}
		})
		var err error
		require.NotPanics(t, func() { err = autograd.Sum(d, false).Backward() })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.Nil(t, v.Grad)
	})
	require.Zero(t, c.BytesInUse())
}

// Record of an op whose inputs require gradients with no backward function
// is refused there, not a nil call in Backward.
func TestRecordNilBackward(t *testing.T) {
	c := tensor.NewCtx()
	c.WithScope(func() {
		v := leaf64(c, []float64{1, 2, 3}, 3)
		defer v.ZeroGrad()
		err := tensor.Try(func() { autograd.Record("double", tensor.Scale(v.Value, 2), []*autograd.Var{v}, nil) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Contains(t, err.Error(), "double")
		// No input requires gradients: no backward is needed.
		k := autograd.Const(c.FromFloat64s(tensor.CPU(), []float64{1}, 1))
		require.NotPanics(t, func() { autograd.Record("double", tensor.Scale(k.Value, 2), []*autograd.Var{k}, nil) })
	})
	require.Zero(t, c.BytesInUse())
}
