package autograd

import (
	"github.com/strata-ml/strata/tensor"
)

// unary records an elementwise op whose derivative the kernels know.
// useX/useY say which of the input and output the derivative reads.
func unary(op tensor.UnaryOp, x *Var, useX, useY bool) *Var {
	out := tensor.Unary(op, x.Value)
	return Record(op.String(), out, []*Var{x}, func(g *tensor.Tensor) []*tensor.Tensor {
		var xv, yv *tensor.Tensor
		if useX {
			xv = x.Value
		}
		if useY {
			yv = out
		}
		return []*tensor.Tensor{tensor.UnaryBackward(op, xv, yv, g)}
	})
}

// Exp returns e^x.
func Exp(x *Var) *Var { return unary(tensor.OpExp, x, false, true) }

// Log returns ln x.
func Log(x *Var) *Var { return unary(tensor.OpLog, x, true, false) }

// Tanh returns tanh x.
func Tanh(x *Var) *Var { return unary(tensor.OpTanh, x, false, true) }

// Gelu returns GELU(x) with the tanh approximation.
func Gelu(x *Var) *Var { return unary(tensor.OpGelu, x, true, false) }

// Relu returns max(x, 0).
func Relu(x *Var) *Var { return unary(tensor.OpRelu, x, true, false) }

// Sqrt returns √x.
func Sqrt(x *Var) *Var { return unary(tensor.OpSqrt, x, false, true) }
