package nn_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// readGolden reads nn/testdata/golden_layers.safetensors (tools/golden/nn_layers.py).
func readGolden(t *testing.T) map[string]*tensor.Tensor {
	t.Helper()
	ts, _, err := tensor.ReadSafetensors(filepath.Join("testdata", "golden_layers.safetensors"), tensor.CPU())
	require.NoError(t, err)
	for _, v := range ts {
		tensor.Keep(v)
	}
	t.Cleanup(func() {
		for _, v := range ts {
			v.Release()
		}
	})
	return ts
}

// checkGoldenGrads runs f on the case's inputs (x, w) as parameters,
// back-propagates the stored dy and compares y, dx and dw with PyTorch's.
func checkGoldenGrads(t *testing.T, g map[string]*tensor.Tensor, name string, tol float64, f func(x, w *autograd.Var) *autograd.Var) {
	t.Helper()
	tensor.WithScope(func() {
		x := autograd.Param(g[name+".x"].Clone(), "x")
		w := autograd.Param(g[name+".w"].Clone(), "w")
		defer nn.Release([]*nn.Parameter{{Var: x}, {Var: w}})
		y := f(x, w)
		require.Equal(t, g[name+".y"].Shape(), y.Value.Shape(), "%s: y's shape", name)
		require.Less(t, relErr(y.Value.Float64s(), g[name+".y"].Float64s()), tol, "%s: y", name)
		require.NoError(t, y.BackwardWith(g[name+".dy"]))
		require.Less(t, relErr(x.Grad.Float64s(), g[name+".dx"].Float64s()), tol, "%s: dx", name)
		require.Less(t, relErr(w.Grad.Float64s(), g[name+".dw"].Float64s()), tol, "%s: dw", name)
	})
}

func TestMSELossMatchesPyTorch(t *testing.T) {
	g := readGolden(t)
	for _, r := range []nn.Reduction{nn.ReduceMean, nn.ReduceSum, nn.ReduceNone} {
		checkGoldenGrads(t, g, "mse_"+r.String(), 1e-12, func(x, w *autograd.Var) *autograd.Var {
			return nn.MSELoss(x, w, r)
		})
	}
}

func TestMSELossGradCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, r := range []nn.Reduction{nn.ReduceMean, nn.ReduceSum, nn.ReduceNone} {
		t.Run(r.String(), func(t *testing.T) {
			x := tensor.RandN(tensor.CPU(), tensor.Float64, rng, 1, 2, 3, 4)
			y := tensor.RandN(tensor.CPU(), tensor.Float64, rng, 1, 2, 3, 4)
			tensor.Keep(x, y)
			defer x.Release()
			defer y.Release()
			require.NoError(t, autograd.GradCheck(func(v []*autograd.Var) *autograd.Var {
				return nn.MSELoss(v[0], v[1], r)
			}, []*tensor.Tensor{x, y}, nil, 1e-6, 1e-7, 1e-6))
		})
	}
}

// TestMSELossFloat64Reference compares the float32 loss with a float64
// sum computed here.
func TestMSELossFloat64Reference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 9))
	a, b := make([]float32, 60), make([]float32, 60)
	var want float64
	for i := range a {
		a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		d := float64(a[i]) - float64(b[i])
		want += d * d
	}
	tensor.WithScope(func() {
		x := autograd.Const(tensor.FromFloat32s(tensor.CPU(), a, 3, 20))
		y := autograd.Const(tensor.FromFloat32s(tensor.CPU(), b, 3, 20))
		require.InDelta(t, want, nn.MSELoss(x, y, nn.ReduceSum).Item(), 1e-5*want)
		require.InDelta(t, want/60, nn.MSELoss(x, y, nn.ReduceMean).Item(), 1e-5*want/60)
		require.Equal(t, []int{3, 20}, nn.MSELoss(x, y, nn.ReduceNone).Shape())
	})
}

func TestMSELossMisuse(t *testing.T) {
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 3, 4))
		y := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 4))
		err := tensor.Try(func() { nn.MSELoss(x, y, nn.ReduceMean) })
		require.ErrorIs(t, err, tensor.ErrShape)
		require.ErrorContains(t, err, "MSELoss")
		err = tensor.Try(func() { nn.MSELoss(x, x, nn.Reduction(7)) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Equal(t, "Reduction(7)", fmt.Sprint(nn.Reduction(7)))
	})
}
