// Package ops is the one table of strata's element-wise ops: for each op
// its name, its code, its formula and which saved values its backward
// reads. Everything else follows from this table:
//
//   - package tensor re-exports the codes as tensor.OpXxx (ops_gen.go,
//     written from the table);
//   - the CPU kernels (internal/cpukern) and the CUDA launchers switch on
//     these codes, and autograd asks BackwardUses what to save;
//   - the CUDA kernels take the code as an int whose enum,
//     kernels/ops_gen.cuh, is written from the table.
//
// `go generate ./tensor/internal/ops` rewrites both generated files with
// the program in gen/, whose test fails while either differs from what the
// table gives now and checks every code of the CUDA enum. (The generator
// is kept out of this package so that programs importing tensor do not
// link go/format.)
//
// A code is the op's position in its list below. Codes cross the CUDA
// kernel ABI, so the fatbin must be rebuilt when they change; the AVX2
// loops of cpukern (arith_amd64.s) take Add, Sub, Mul and Div as 0-3.
//
// Reductions have no codes: each backend has one entry point per
// reduction (sum, max), chosen by name, so there is nothing to share.
package ops

import "fmt"

//go:generate go run ./gen -root ../../..

// UnaryOp names an element-wise function of one operand, for Unary and
// UnaryBackward.
type UnaryOp uint8

// The unary ops, in code order. Add new ones at the end.
const (
	Neg UnaryOp = iota
	Exp
	Log
	Sqrt
	Rsqrt
	Tanh
	Gelu
	Relu
	Abs
	Square
	Recip
	Sigmoid
	Silu
	NumUnary // the number of unary ops: codes are 0 .. NumUnary-1
)

// BinaryOp names an element-wise function of two operands, for Binary.
type BinaryOp uint8

// The binary ops, in code order. Add new ones at the end.
const (
	Add BinaryOp = iota
	Sub
	Mul
	Div
	Max
	Min
	Pow
	NumBinary // the number of binary ops: codes are 0 .. NumBinary-1
)

// Reads says which saved values a unary op's backward reads: the forward
// input x, the output y, or neither.
type Reads uint8

const (
	ReadsNone Reads = iota
	ReadsX
	ReadsY
)

// Unary describes one unary op.
type Unary struct {
	Name     string // Go name: String(), tensor.Op<Name>, U_<NAME> in CUDA C
	Forward  string // y as a function of x
	Backward string // dx as a function of dy and the saved x or y
	Reads    Reads  // what Backward reads
}

// Binary describes one binary op.
type Binary struct {
	Name    string // Go name: String(), tensor.Op<Name>, B_<NAME> in CUDA C
	Forward string // y as a function of a and b
}

// Unaries is the unary table, indexed by code.
var Unaries = [NumUnary]Unary{
	Neg:     {"Neg", "-x", "-dy", ReadsNone},
	Exp:     {"Exp", "e^x", "dy*y", ReadsY},
	Log:     {"Log", "ln x", "dy/x", ReadsX},
	Sqrt:    {"Sqrt", "sqrt(x)", "dy*0.5/y", ReadsY},
	Rsqrt:   {"Rsqrt", "1/sqrt(x)", "dy*(-0.5)*y^3", ReadsY},
	Tanh:    {"Tanh", "tanh x", "dy*(1-y^2)", ReadsY},
	Gelu:    {"Gelu", "x*sigmoid(2u), u = sqrt(2/pi)(x + 0.044715x^3) (GELU, tanh approximation)", "dy*(s + 2x*s*(1-s)*du/dx), s = sigmoid(2u)", ReadsX},
	Relu:    {"Relu", "max(x, 0), NaN propagating", "dy where not y <= 0 (a NaN y passes dy, as PyTorch's threshold_backward)", ReadsY},
	Abs:     {"Abs", "|x|", "dy*sign(x), 0 at 0, NaN at NaN", ReadsX},
	Square:  {"Square", "x^2", "dy*2x", ReadsX},
	Recip:   {"Recip", "1/x", "-dy*y^2", ReadsY},
	Sigmoid: {"Sigmoid", "1/(1+e^-x)", "dy*y*(1-y)", ReadsY},
	Silu:    {"Silu", "x/(1+e^-x) = x*sigmoid(x) (SiLU, swish)", "dy*s*(1 + x*(1-s)), s = sigmoid(x)", ReadsX},
}

// Binaries is the binary table, indexed by code.
var Binaries = [NumBinary]Binary{
	Add: {"Add", "a+b"},
	Sub: {"Sub", "a-b"},
	Mul: {"Mul", "a*b"},
	Div: {"Div", "a/b"},
	Max: {"Max", "max(a, b), NaN propagating (torch.maximum)"},
	Min: {"Min", "min(a, b), NaN propagating (torch.minimum)"},
	Pow: {"Pow", "a^b, computed in float64 and rounded once"},
}

// String returns the op's name, such as "Gelu".
func (op UnaryOp) String() string {
	if op < NumUnary {
		return Unaries[op].Name
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(op))
}

// BackwardUses reports which saved tensors the backward of op reads: the
// input x, the output y, or neither. Autograd saves only those; the other
// argument of UnaryBackward may be nil.
func (op UnaryOp) BackwardUses() (x, y bool) {
	if op >= NumUnary {
		return false, false
	}
	r := Unaries[op].Reads
	return r == ReadsX, r == ReadsY
}

// String returns the op's name, such as "Add".
func (op BinaryOp) String() string {
	if op < NumBinary {
		return Binaries[op].Name
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(op))
}
