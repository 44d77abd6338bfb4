package autograd_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// goldenCase is one op case of tools/golden/ops.py.
type goldenCase struct {
	Op        string   `json:"op"`
	Inputs    []string `json:"inputs"`
	Grads     []string `json:"grads"`
	Dim       any      `json:"dim"`
	Dims      []int    `json:"dims"`
	Keepdim   bool     `json:"keepdim"`
	Shape     []int    `json:"shape"`
	Factor    float64  `json:"factor"`
	Eps       float64  `json:"eps"`
	TransW    bool     `json:"transpose_w"`
	TransX    bool     `json:"transpose_x"`
	Broadcast bool     `json:"broadcast"`
}

func intList(d any) []int {
	switch v := d.(type) {
	case nil:
		return nil
	case float64:
		return []int{int(v)}
	case []any:
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x.(float64))
		}
		return out
	}
	panic("bad dim")
}

// forward builds the op of a golden case from its input vars.
func forward(t *testing.T, c goldenCase, in map[string]*autograd.Var, raw map[string]*tensor.Tensor) *autograd.Var {
	x, w := in["x"], in["w"]
	switch c.Op {
	case "add":
		return autograd.Add(x, w)
	case "sub":
		return autograd.Sub(x, w)
	case "mul":
		return autograd.Mul(x, w)
	case "div":
		return autograd.Div(x, w)
	case "matmul":
		if c.TransW {
			w = autograd.Transpose(w, -2, -1)
		}
		if c.TransX {
			x = autograd.Transpose(x, -2, -1)
		}
		return autograd.MatMul(x, w)
	case "sum":
		return autograd.Sum(x, c.Keepdim, intList(c.Dim)...)
	case "mean":
		return autograd.Mean(x, c.Keepdim, intList(c.Dim)...)
	case "exp":
		return autograd.Exp(x)
	case "log":
		return autograd.Log(x)
	case "tanh":
		return autograd.Tanh(x)
	case "gelu":
		return autograd.Gelu(x)
	case "silu":
		return autograd.Silu(x)
	case "softmax":
		return autograd.Softmax(x)
	case "log_softmax":
		return autograd.LogSoftmax(x)
	case "scale":
		return autograd.Scale(x, c.Factor)
	case "layer_norm":
		return autograd.LayerNorm(x, w, in["b"], c.Eps)
	case "embedding":
		return autograd.Embedding(w, raw["ids"])
	case "cross_entropy":
		return autograd.CrossEntropy(x, raw["targets"])
	case "masked_fill":
		return autograd.CausalMask(x, math.Inf(-1))
	case "causal_softmax": // PyTorch's softmax(masked_fill(x, mask, -inf)), our fused op
		return autograd.CausalSoftmax(x)
	case "transpose":
		return autograd.Contiguous(autograd.Transpose(x, c.Dims[0], c.Dims[1]))
	case "reshape":
		return autograd.Reshape(x, c.Shape...)
	}
	t.Fatalf("no forward for op %q", c.Op)
	return nil
}

// closeTo checks got against want elementwise within atol + rtol·|want|,
// treating equal infinities as equal.
func closeTo(t *testing.T, what string, want, got []float64, atol, rtol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.IsInf(want[i], 0) && want[i] == got[i] {
			continue
		}
		if d := math.Abs(want[i] - got[i]); !(d <= atol+rtol*math.Abs(want[i])) {
			t.Fatalf("%s: element %d: want %.12g, got %.12g (diff %.3g)", what, i, want[i], got[i], d)
		}
	}
}

func TestGoldenOpsAgainstPyTorch(t *testing.T) {
	ts, meta, err := tensor.ReadSafetensors("../tensor/testdata/golden_ops.safetensors", tensor.CPU())
	require.NoError(t, err)
	defer func() {
		for _, v := range ts {
			v.Release()
		}
	}()
	var cases []string
	require.NoError(t, json.Unmarshal([]byte(meta["cases"]), &cases))
	ran := 0
	for _, name := range cases {
		var c goldenCase
		require.NoError(t, json.Unmarshal([]byte(meta[name]), &c))
		if len(c.Grads) == 0 { // optimizer and clipping cases: nn tests them
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			tensor.WithScope(func() {
				in := map[string]*autograd.Var{}
				raw := map[string]*tensor.Tensor{}
				for _, n := range c.Inputs {
					v := ts[name+"."+n]
					raw[n] = v
					if v.DType() == tensor.Float64 {
						in[n] = autograd.Param(v.Clone(), n)
					}
				}
				y := forward(t, c, in, raw)
				closeTo(t, name+".y", ts[name+".y"].Float64s(), y.Value.Float64s(), 1e-12, 1e-10)
				loss := autograd.Sum(autograd.Mul(y, autograd.Const(ts[name+".dy"])), false)
				require.NoError(t, loss.Backward())
				for _, g := range c.Grads {
					v := in[g[1:]]
					require.NotNil(t, v.Grad, "gradient %s", g)
					closeTo(t, name+"."+g, ts[name+"."+g].Float64s(), v.Grad.Float64s(), 1e-12, 1e-9)
				}
				for _, v := range in {
					v.ZeroGrad()
					v.Value.Release()
				}
			})
		})
	}
	require.Equal(t, 36, ran, "every autograd case of the golden file ran")
}
