package autograd_test

import (
	"testing"

	"github.com/strata-ml/strata/tensor"
)

// unaryOps are the golden cases of the op table's unary ops, run through
// autograd.Unary.
var unaryOps = map[string]tensor.UnaryOp{
	"neg": tensor.OpNeg, "sqrt": tensor.OpSqrt, "rsqrt": tensor.OpRsqrt, "abs": tensor.OpAbs,
	"square": tensor.OpSquare, "reciprocal": tensor.OpRecip, "sigmoid": tensor.OpSigmoid, "relu": tensor.OpRelu,
}

// binaryOps are the golden cases of the op table's binary ops that have
// no gradient (forward only, tensor.Binary).
var binaryOps = map[string]tensor.BinaryOp{"maximum": tensor.OpMax, "minimum": tensor.OpMin, "pow": tensor.OpPow}

// tensorOp runs the golden cases that call package tensor, not autograd:
// the forward-only ops (grads nil) and CrossEntropyFused, whose gradient
// for the upstream dy comes with its loss. ok is false for the others.
func tensorOp(t *testing.T, c goldenCase, raw map[string]*tensor.Tensor, dy *tensor.Tensor) (y *tensor.Tensor, grads map[string]*tensor.Tensor, ok bool) {
	x, w := raw["x"], raw["w"]
	if op, ok := binaryOps[c.Op]; ok {
		return tensor.Binary(op, x, w), nil, true
	}
	switch c.Op {
	case "amax":
		return tensor.Max(x, c.Keepdim, intList(c.Dim)...), nil, true
	case "add_scalar":
		return tensor.AddScalar(x, c.Scalar), nil, true
	case "expand":
		return x.Expand(c.Shape...), nil, true
	case "squeeze":
		return x.Squeeze(c.Axis), nil, true
	case "unsqueeze":
		return x.Unsqueeze(c.Axis), nil, true
	case "concat":
		return tensor.Concat(c.Axis, x, w, raw["b"]), nil, true
	case "cross_entropy_fused":
		loss, dx := tensor.CrossEntropyFused(x, c.Classes, raw["targets"], dy, c.IgnoreIndex, x.DType())
		return loss, map[string]*tensor.Tensor{"dx": dx}, true
	}
	return nil, nil, false
}
