package autograd_test

// Nil arguments of the exported functions: an *tensor.OpError wrapping
// tensor.ErrArgument that names the op, never a nil-pointer dereference.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// varOp is an exported function of autograd over n *Var arguments, of
// which those in optional may be nil.
type varOp struct {
	name     string
	n        int
	optional []int
	call     func(a []*autograd.Var)
}

var varOps = []varOp{
	{"Add", 2, nil, func(a []*autograd.Var) { autograd.Add(a[0], a[1]) }},
	{"Sub", 2, nil, func(a []*autograd.Var) { autograd.Sub(a[0], a[1]) }},
	{"Mul", 2, nil, func(a []*autograd.Var) { autograd.Mul(a[0], a[1]) }},
	{"Div", 2, nil, func(a []*autograd.Var) { autograd.Div(a[0], a[1]) }},
	{"Affine", 1, nil, func(a []*autograd.Var) { autograd.Affine(a[0], 2, 1) }},
	{"Scale", 1, nil, func(a []*autograd.Var) { autograd.Scale(a[0], 2) }},
	{"Neg", 1, nil, func(a []*autograd.Var) { autograd.Neg(a[0]) }},
	{"MatMul", 2, nil, func(a []*autograd.Var) { autograd.MatMul(a[0], a[1]) }},
	{"Linear", 3, []int{2}, func(a []*autograd.Var) { autograd.Linear(a[0], a[1], a[2]) }},
	{"LinearHalf", 3, []int{2}, func(a []*autograd.Var) { autograd.LinearHalf(a[0], a[1], a[2]) }},
	{"GeluLinear", 3, []int{2}, func(a []*autograd.Var) { autograd.GeluLinear(a[0], a[1], a[2]) }},
	{"GeluLinearKept", 3, []int{2}, func(a []*autograd.Var) { autograd.GeluLinearKept(a[0], a[1], a[2]) }},
	{"CausalAttention", 3, nil, func(a []*autograd.Var) { autograd.CausalAttention(a[0], a[1], a[2], 0, 0, 0) }},
	{"FusedCausalAttention", 3, nil, func(a []*autograd.Var) { autograd.FusedCausalAttention(a[0], a[1], a[2], 0, 0, 0) }},
	{"FusedCausalAttentionQKV", 1, nil, func(a []*autograd.Var) { autograd.FusedCausalAttentionQKV(a[0], 1, 0, 0, 0) }},
	{"LinearCrossEntropy", 2, nil, func(a []*autograd.Var) {
		autograd.LinearCrossEntropy(a[0], a[1], tensor.FromInt32s(tensor.CPU(), []int32{0, 1}, 2), 0)
	}},
	{"Softmax", 1, nil, func(a []*autograd.Var) { autograd.Softmax(a[0]) }},
	{"LogSoftmax", 1, nil, func(a []*autograd.Var) { autograd.LogSoftmax(a[0]) }},
	{"CausalSoftmax", 1, nil, func(a []*autograd.Var) { autograd.CausalSoftmax(a[0]) }},
	{"CausalMask", 1, nil, func(a []*autograd.Var) { autograd.CausalMask(a[0], -1) }},
	{"LayerNorm", 3, []int{1, 2}, func(a []*autograd.Var) { autograd.LayerNorm(a[0], a[1], a[2], 1e-5) }},
	{"LayerNormHalf", 3, []int{1, 2}, func(a []*autograd.Var) { autograd.LayerNormHalf(a[0], a[1], a[2], 1e-5) }},
	{"Embedding", 1, nil, func(a []*autograd.Var) {
		autograd.Embedding(a[0], tensor.FromInt32s(tensor.CPU(), []int32{0, 1}, 2))
	}},
	{"CrossEntropy", 1, nil, func(a []*autograd.Var) {
		autograd.CrossEntropy(a[0], tensor.FromInt32s(tensor.CPU(), []int32{0, 1}, 2))
	}},
	{"Dropout", 1, nil, func(a []*autograd.Var) { autograd.Dropout(a[0], 0.5, 1, 0) }},
	{"Cast", 1, nil, func(a []*autograd.Var) { autograd.Cast(a[0], tensor.Float64) }},
	{"Reshape", 1, nil, func(a []*autograd.Var) { autograd.Reshape(a[0], -1) }},
	{"Transpose", 1, nil, func(a []*autograd.Var) { autograd.Transpose(a[0], 0, 1) }},
	{"Permute", 1, nil, func(a []*autograd.Var) { autograd.Permute(a[0], 1, 0) }},
	{"Contiguous", 1, nil, func(a []*autograd.Var) { autograd.Contiguous(a[0]) }},
	{"Narrow", 1, nil, func(a []*autograd.Var) { autograd.Narrow(a[0], 0, 0, 1) }},
	{"Split", 1, nil, func(a []*autograd.Var) { autograd.Split(a[0], 1, 0) }},
	{"Sum", 1, nil, func(a []*autograd.Var) { autograd.Sum(a[0], false) }},
	{"Mean", 1, nil, func(a []*autograd.Var) { autograd.Mean(a[0], false) }},
	{"Unary", 1, nil, func(a []*autograd.Var) { autograd.Unary(tensor.OpExp, a[0]) }},
	{"Exp", 1, nil, func(a []*autograd.Var) { autograd.Exp(a[0]) }},
	{"Log", 1, nil, func(a []*autograd.Var) { autograd.Log(a[0]) }},
	{"Tanh", 1, nil, func(a []*autograd.Var) { autograd.Tanh(a[0]) }},
	{"Gelu", 1, nil, func(a []*autograd.Var) { autograd.Gelu(a[0]) }},
	{"Relu", 1, nil, func(a []*autograd.Var) { autograd.Relu(a[0]) }},
	{"Silu", 1, nil, func(a []*autograd.Var) { autograd.Silu(a[0]) }},
	{"Sqrt", 1, nil, func(a []*autograd.Var) { autograd.Sqrt(a[0]) }},
}

// Every *Var argument, in turn nil (where not optional) or a Var with no
// value, is refused with an *tensor.OpError wrapping ErrArgument that
// names the op. Add(x, nil) and its kin used to dereference nil.
func TestNilVarArguments(t *testing.T) {
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 2))
		for _, op := range varOps {
			for i := range op.n {
				for _, bad := range []*autograd.Var{nil, {}} {
					args := make([]*autograd.Var, op.n)
					for j := range args {
						args[j] = x
					}
					args[i] = bad
					name := fmt.Sprintf("%s arg %d %v", op.name, i, bad)
					var err error
					require.NotPanics(t, func() { err = tensor.Try(func() { op.call(args) }) }, name)
					if bad == nil && slicesContains(op.optional, i) {
						continue // may be nil; the op may still fail on the toy shapes
					}
					require.ErrorIs(t, err, tensor.ErrArgument, name)
					want := op.name
					if want == "Unary" {
						want = "Exp" // the op's own name
					}
					require.Contains(t, err.Error(), want, name)
				}
			}
		}
	})
}

func slicesContains(s []int, v int) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// Nil tensors and nil functions where a tensor or a function is needed,
// and a Param of an integer tensor, are refused.
func TestNilAndIntegerLeaves(t *testing.T) {
	tensor.WithScope(func() {
		x := autograd.Const(tensor.Zeros(tensor.CPU(), tensor.Float32, 2, 2))
		for name, tc := range map[string]struct {
			f   func()
			err error
		}{
			"Param nil":            {func() { autograd.Param(nil, "w") }, tensor.ErrArgument},
			"Const nil":            {func() { autograd.Const(nil) }, tensor.ErrArgument},
			"Param int32":          {func() { autograd.Param(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 2), "ids") }, tensor.ErrDType},
			"Record nil out":       {func() { autograd.Record("custom", nil, []*autograd.Var{x}, nil) }, tensor.ErrArgument},
			"RecordRegion nil out": {func() { autograd.RecordRegion("region", nil, []*autograd.Var{x}, nil) }, tensor.ErrArgument},
			"RecordRegion nil func": {func() {
				autograd.RecordRegion("region", tensor.Zeros(tensor.CPU(), tensor.Float32, 2), []*autograd.Var{x}, nil)
			}, tensor.ErrArgument},
			"Embedding nil ids": {func() { autograd.Embedding(x, nil) }, tensor.ErrArgument},
			"CrossEntropy nil":  {func() { autograd.CrossEntropy(x, nil) }, tensor.ErrArgument},
			"LinearCrossEntropy nil": {func() {
				autograd.LinearCrossEntropy(x, x, nil, 0)
			}, tensor.ErrArgument},
		} {
			var err error
			require.NotPanics(t, func() { err = tensor.Try(tc.f) }, name)
			require.ErrorIs(t, err, tc.err, name)
			t.Log(name, ": ", err)
		}
		require.Contains(t, tensor.Try(func() {
			autograd.Param(tensor.FromInt32s(tensor.CPU(), []int32{1, 2}, 2), "ids")
		}).Error(), "floating-point")
	})
	// Record takes nil inputs (an op's optional arguments).
	tensor.WithScope(func() {
		require.NoError(t, tensor.Try(func() {
			autograd.Record("custom", tensor.Zeros(tensor.CPU(), tensor.Float32, 2), []*autograd.Var{nil}, nil)
		}))
	})
	var nilVar *autograd.Var
	require.Error(t, nilVar.Backward())
	require.Error(t, nilVar.BackwardWith(nil))
	require.Error(t, autograd.GradCheck(nil, nil, nil, 1e-6, 1e-5, 1e-3))
	require.Error(t, autograd.GradCheck(func(xs []*autograd.Var) *autograd.Var { return xs[0] }, []*tensor.Tensor{nil}, nil, 1e-6, 1e-5, 1e-3))
}
