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

	Alpha       float64 `json:"alpha"`
	Beta        float64 `json:"beta"`
	Scalar      float64 `json:"scalar"`
	Axis        int     `json:"axis"`
	Start       int     `json:"start"`
	Length      int     `json:"length"`
	Size        int     `json:"size"`
	Heads       int     `json:"heads"`
	Fused       bool    `json:"fused"`
	ChunkRows   int     `json:"chunk_rows"`
	Classes     int     `json:"classes"`
	IgnoreIndex int32   `json:"ignore_index"`
	ForwardOnly bool    `json:"forward_only"` // no dy, no grads: y alone is compared
	Exact       bool    `json:"exact"`        // compared bit for bit (a cast)
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
	if op, ok := unaryOps[c.Op]; ok {
		return autograd.Unary(op, x)
	}
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
	case "affine":
		return autograd.Affine(x, c.Alpha, c.Beta)
	case "causal_attention":
		if c.Fused {
			return autograd.FusedCausalAttention(in["q"], in["k"], in["v"], 0, 0, 0)
		}
		return autograd.CausalAttention(in["q"], in["k"], in["v"], 0, 0, 0)
	case "causal_attention_qkv":
		return autograd.FusedCausalAttentionQKV(x, c.Heads, 0, 0, 0)
	case "linear_cross_entropy":
		return autograd.LinearCrossEntropy(x, w, raw["targets"], c.ChunkRows)
	case "permute":
		return autograd.Permute(x, c.Dims...)
	case "narrow":
		return autograd.Narrow(x, c.Axis, c.Start, c.Length)
	case "split":
		p := autograd.Split(x, c.Size, c.Axis)
		require.Len(t, p, 3)
		return autograd.Add(autograd.Mul(p[0], p[1]), p[2])
	case "cast_bf16":
		return autograd.Cast(autograd.Cast(x, tensor.BFloat16), tensor.Float32)
	}
	t.Fatalf("no forward for op %q", c.Op)
	return nil
}

// closeTo checks got against want elementwise within atol + rtol·|want|;
// an infinite want needs the same infinity.
func closeTo(t *testing.T, what string, want, got []float64, atol, rtol float64) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.IsInf(want[i], 0) {
			if want[i] != got[i] {
				t.Fatalf("%s: element %d: want %v, got %.12g", what, i, want[i], got[i])
			}
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
	withGrads, fwdOnly := 0, 0
	for _, name := range cases {
		var c goldenCase
		require.NoError(t, json.Unmarshal([]byte(meta[name]), &c))
		switch {
		case c.ForwardOnly:
			fwdOnly++
		case len(c.Grads) == 0: // optimizer and clipping cases: nn tests them
			continue
		default:
			withGrads++
		}
		t.Run(name, func(t *testing.T) { tensor.WithScope(func() { runGolden(t, ts, name, c) }) })
	}
	require.Equal(t, 61, withGrads, "every autograd case of the golden file ran")
	require.Equal(t, 11, fwdOnly, "every forward-only case of the golden file ran")
}

// runGolden runs case name of the golden file ts: y against the stored
// y and, unless the case is forward-only, the gradients of sum(y·dy).
func runGolden(t *testing.T, ts map[string]*tensor.Tensor, name string, c goldenCase) {
	atol, rtol, gtol := 1e-12, 1e-10, 1e-9
	if c.Exact {
		atol, rtol, gtol = 0, 0, 0
	}
	in := map[string]*autograd.Var{}
	raw := map[string]*tensor.Tensor{}
	for _, n := range c.Inputs {
		v := ts[name+"."+n]
		raw[n] = v
		if v.DType().IsFloat() {
			in[n] = autograd.Param(v.Clone(), n)
		}
	}
	defer func() {
		for _, v := range in {
			v.ZeroGrad()
			v.Value.Release()
		}
	}()
	check := func(what string, got *tensor.Tensor, tol float64) {
		t.Helper()
		require.NotNil(t, got, what)
		want := ts[name+"."+what]
		require.Equal(t, want.Shape(), got.Shape(), what)
		closeTo(t, name+"."+what, want.Float64s(), got.Float64s(), atol, tol)
	}
	if y, grads, ok := tensorOp(t, c, raw, ts[name+".dy"]); ok {
		check("y", y, rtol)
		for _, g := range c.Grads {
			check(g, grads[g], gtol)
		}
		return
	}
	require.False(t, c.ForwardOnly, "no tensor op for forward-only op %q", c.Op)
	y := forward(t, c, in, raw)
	check("y", y.Value, rtol)
	loss := autograd.Sum(autograd.Mul(y, autograd.Const(ts[name+".dy"])), false)
	require.NoError(t, loss.Backward())
	for _, g := range c.Grads {
		check(g, in[g[1:]].Grad, gtol)
	}
}
