package nn

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Reduction says how a loss combines its per-element values, PyTorch's
// reduction argument. The zero value is ReduceMean, PyTorch's default.
type Reduction int

const (
	// ReduceMean averages over every element (a scalar).
	ReduceMean Reduction = iota
	// ReduceSum adds every element (a scalar).
	ReduceSum
	// ReduceNone keeps the per-element losses (the input's shape).
	ReduceNone
)

func (r Reduction) String() string {
	switch r {
	case ReduceMean:
		return "mean"
	case ReduceSum:
		return "sum"
	case ReduceNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// reduce applies r to per-element losses l (op names the loss in errors).
func reduce(op string, l *autograd.Var, r Reduction) *autograd.Var {
	switch r {
	case ReduceMean:
		return autograd.Mean(l, false)
	case ReduceSum:
		return autograd.Sum(l, false)
	case ReduceNone:
		return l
	}
	panic(&tensor.OpError{Op: op, Msg: fmt.Sprintf("reduction %v: want ReduceMean, ReduceSum or ReduceNone", r), Err: tensor.ErrArgument})
}

// MSELoss is the squared error (input − target)², reduced as r:
// torch.nn.functional.mse_loss(input, target, reduction). Gradients flow
// to both operands where they require them (wrap a plain target tensor in
// autograd.Const). input and target must have the same shape (PyTorch
// broadcasts with a warning; here that is an error). Panics with a
// *tensor.OpError (ErrShape, ErrArgument, or the op's) on misuse, a nil
// operand among it, like every op; tensor.Try, Step and TrainStep turn it
// into an error.
func MSELoss(input, target *autograd.Var, r Reduction) *autograd.Var {
	needVar("nn.MSELoss", "input", input)
	needVar("nn.MSELoss", "target", target)
	if a, b := input.Value.Shape(), target.Value.Shape(); !slices.Equal(a, b) {
		panic(&tensor.OpError{Op: "nn.MSELoss", Msg: fmt.Sprintf("input %v and target %v: want the same shape", a, b), Err: tensor.ErrShape})
	}
	d := autograd.Sub(input, target)
	return reduce("nn.MSELoss", autograd.Mul(d, d), r)
}
