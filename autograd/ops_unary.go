package autograd

import (
	"github.com/strata-ml/strata/tensor"
)

// Unary records any element-wise op of the op table (tensor.OpXxx): its
// derivative is the kernels' UnaryBackward, which reads the saved input,
// the output or neither, as op.BackwardUses says.
func Unary(op tensor.UnaryOp, x *Var) *Var {
	args(op.String(), "x", x)
	out := tensor.Unary(op, x.Value)
	useX, useY := op.BackwardUses()
	return Record(op.String(), out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		var xv, yv *tensor.Tensor
		if useX {
			xv = x.Value
		}
		if useY {
			yv = out
		}
		return []*tensor.Tensor{tensor.UnaryBackward(op, xv, yv, g)}
	}).reads(bit(0, useX), useY)
}

// Exp returns e^x.
func Exp(x *Var) *Var { return Unary(tensor.OpExp, x) }

// Log returns ln x.
func Log(x *Var) *Var { return Unary(tensor.OpLog, x) }

// Tanh returns tanh x.
func Tanh(x *Var) *Var { return Unary(tensor.OpTanh, x) }

// Gelu returns GELU(x) with the tanh approximation.
func Gelu(x *Var) *Var { return Unary(tensor.OpGelu, x) }

// Relu returns max(x, 0).
func Relu(x *Var) *Var { return Unary(tensor.OpRelu, x) }

// Silu returns x·sigmoid(x) (SiLU, also called swish; PyTorch's F.silu).
func Silu(x *Var) *Var { return Unary(tensor.OpSilu, x) }

// Sqrt returns √x.
func Sqrt(x *Var) *Var { return Unary(tensor.OpSqrt, x) }
