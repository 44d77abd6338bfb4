package nn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// rmsNorm applies an RMSNorm with weight w and eps to x.
func rmsNorm(x, w *autograd.Var, eps float64) *autograd.Var {
	n := &nn.RMSNorm{Weight: &nn.Parameter{Var: w, Name: "weight"}, Eps: eps}
	return n.Forward(x)
}

func TestRMSNormMatchesPyTorch(t *testing.T) {
	g := readGolden(t)
	checkGoldenGrads(t, g, "rmsnorm", 1e-12, func(x, w *autograd.Var) *autograd.Var { return rmsNorm(x, w, 1e-6) })
	// float32 with eps 0: the dtype's machine epsilon, as PyTorch's
	// eps=None; the inputs are small enough that eps changes y by ~5%.
	checkGoldenGrads(t, g, "rmsnorm_f32", 2e-6, func(x, w *autograd.Var) *autograd.Var { return rmsNorm(x, w, 0) })
}

func TestRMSNormGradCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	x := tensor.RandN(tensor.CPU(), tensor.Float64, rng, 1, 2, 3, 6)
	w := tensor.RandN(tensor.CPU(), tensor.Float64, rng, 1, 6)
	tensor.Keep(x, w)
	defer x.Release()
	defer w.Release()
	require.NoError(t, autograd.GradCheck(func(v []*autograd.Var) *autograd.Var {
		return rmsNorm(v[0], v[1], 1e-5)
	}, []*tensor.Tensor{x, w}, nil, 1e-6, 1e-7, 1e-6))
	// Without a weight.
	require.NoError(t, autograd.GradCheck(func(v []*autograd.Var) *autograd.Var {
		return (&nn.RMSNorm{Eps: 1e-5}).Forward(v[0])
	}, []*tensor.Tensor{x}, nil, 1e-6, 1e-7, 1e-6))
}

// TestRMSNormFloat64Reference checks the float32 forward against the
// formula computed here in float64.
func TestRMSNormFloat64Reference(t *testing.T) {
	n := nn.Must(nn.NewRMSNorm(nn.Options{}, "norm", 5))
	defer nn.Release(n.Parameters())
	require.Equal(t, "norm.weight", n.Weight.Name)
	require.Equal(t, []float32{1, 1, 1, 1, 1}, n.Weight.Value.Float32s())
	tensor.WithScope(func() { n.Weight.Value.CopyFrom(tensor.FromFloat32s(tensor.CPU(), []float32{1, 2, 0.5, -1, 3}, 5)) })
	rng := rand.New(rand.NewPCG(2, 2))
	data := make([]float32, 15)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	w := []float64{1, 2, 0.5, -1, 3}
	tensor.WithScope(func() {
		got := n.Forward(autograd.Const(tensor.FromFloat32s(tensor.CPU(), data, 3, 5))).Value.Float32s()
		eps := math.Ldexp(1, -23)
		for r := range 3 {
			var ms float64
			for j := range 5 {
				v := float64(data[5*r+j])
				ms += v * v
			}
			inv := 1 / math.Sqrt(ms/5+eps)
			for j := range 5 {
				want := float64(data[5*r+j]) * inv * w[j]
				require.InDelta(t, want, float64(got[5*r+j]), 1e-6*math.Max(1, math.Abs(want)), "row %d col %d", r, j)
			}
		}
	})
}

func TestRMSNormMisuse(t *testing.T) {
	_, err := nn.NewRMSNorm(nn.Options{}, "norm", 0)
	require.ErrorIs(t, err, tensor.ErrArgument)
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Ones(tensor.CPU(), tensor.Float32, 2, 4))
		err := tensor.Try(func() { (&nn.RMSNorm{Eps: -1}).Forward(x) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		err = tensor.Try(func() { (&nn.RMSNorm{Eps: math.NaN()}).Forward(x) })
		require.ErrorIs(t, err, tensor.ErrArgument)
	})
}
