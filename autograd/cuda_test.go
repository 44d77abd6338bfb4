package autograd_test

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestGradCheckOnCUDA runs the finite-difference gradient check in
// float64 on cuda:0, over the ops of a transformer block: the forward and
// backward kernels of the CUDA backend must agree with each other, as the
// CPU's do. It skips without a GPU (fails when STRATA_REQUIRE_GPU is set).
func TestGradCheckOnCUDA(t *testing.T) {
	dev, err := tensor.CUDA(0)
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_GPU") != "" {
			t.Fatalf("STRATA_REQUIRE_GPU is set, but cuda:0 is unavailable: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	before := dev.Memory().InUse()
	rng := rand.New(rand.NewPCG(11, 12))
	randn := func(shape ...int) *tensor.Tensor {
		x := tensor.RandN(dev, tensor.Float64, rng, 1, shape...)
		tensor.Keep(x)
		return x
	}
	positive := func(shape ...int) *tensor.Tensor {
		x := tensor.RandUniform(dev, tensor.Float64, rng, 0.5, 2, shape...)
		tensor.Keep(x)
		return x
	}
	ids := tensor.FromInt32s(dev, []int32{1, 0, 3, 1, 2, 3}, 2, 3)
	tgt := tensor.FromInt32s(dev, []int32{4, autograd.IgnoreIndex, 0, 2}, 4)
	tensor.Keep(ids, tgt)
	cases := []struct {
		name string
		in   []*tensor.Tensor
		f    func(x []*autograd.Var) *autograd.Var
	}{
		{"Mul/broadcast", []*tensor.Tensor{randn(2, 1, 4), randn(3, 1)}, func(x []*autograd.Var) *autograd.Var { return autograd.Mul(x[0], x[1]) }},
		{"Div/broadcast", []*tensor.Tensor{randn(2, 3), positive(3)}, func(x []*autograd.Var) *autograd.Var { return autograd.Div(x[0], x[1]) }},
		{"MatMul/transposed", []*tensor.Tensor{randn(2, 4, 3), randn(2, 5, 4)}, func(x []*autograd.Var) *autograd.Var {
			return autograd.MatMul(autograd.Transpose(x[0], -2, -1), autograd.Transpose(x[1], 1, 2))
		}},
		{"Linear", []*tensor.Tensor{randn(2, 3, 4), randn(5, 4), randn(5)}, func(x []*autograd.Var) *autograd.Var { return autograd.Linear(x[0], x[1], x[2]) }},
		{"Sum+Mean", []*tensor.Tensor{randn(2, 3, 4)}, func(x []*autograd.Var) *autograd.Var {
			return autograd.Add(autograd.Sum(x[0], true, 0, 2), autograd.Mean(x[0], true, 1, 2))
		}},
		{"Gelu", []*tensor.Tensor{randn(9)}, func(x []*autograd.Var) *autograd.Var { return autograd.Gelu(x[0]) }},
		{"Tanh+Exp+Log", []*tensor.Tensor{positive(7)}, func(x []*autograd.Var) *autograd.Var {
			return autograd.Log(autograd.Add(autograd.Exp(autograd.Tanh(x[0])), x[0]))
		}},
		{"LogSoftmax", []*tensor.Tensor{randn(3, 5)}, func(x []*autograd.Var) *autograd.Var { return autograd.LogSoftmax(x[0]) }},
		{"CausalSoftmax", []*tensor.Tensor{randn(2, 3, 5)}, func(x []*autograd.Var) *autograd.Var { return autograd.CausalSoftmax(x[0]) }},
		{"LayerNorm", []*tensor.Tensor{randn(3, 6), randn(6), randn(6)}, func(x []*autograd.Var) *autograd.Var {
			return autograd.LayerNorm(x[0], x[1], x[2], 1e-5)
		}},
		{"Embedding", []*tensor.Tensor{randn(4, 3)}, func(x []*autograd.Var) *autograd.Var { return autograd.Embedding(x[0], ids) }},
		{"CrossEntropy", []*tensor.Tensor{randn(4, 6)}, func(x []*autograd.Var) *autograd.Var { return autograd.CrossEntropy(x[0], tgt) }},
		{"Dropout", []*tensor.Tensor{randn(50)}, func(x []*autograd.Var) *autograd.Var { return autograd.Dropout(x[0], 0.3, 42, 7) }},
		{"CausalAttention/dropout", []*tensor.Tensor{randn(2, 1, 3, 2), randn(2, 1, 3, 2), randn(2, 1, 3, 2)}, func(x []*autograd.Var) *autograd.Var {
			return autograd.CausalAttention(x[0], x[1], x[2], 0.25, 9, 3)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.NoError(t, autograd.GradCheck(c.f, c.in, nil, 1e-6, 1e-6, 1e-6))
		})
	}
	for _, c := range cases {
		for _, x := range c.in {
			x.Release()
		}
	}
	ids.Release()
	tgt.Release()
	require.NoError(t, dev.Synchronize())
	require.Equal(t, before, dev.Memory().InUse(), "every tensor was returned")
}
