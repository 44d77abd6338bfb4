package nn

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// RMSNorm normalises over the last axis by the root mean square, with a
// learnt scale, as torch.nn.RMSNorm:
//
//	y = x / √(mean(x², last axis) + Eps) · Weight
//
// Eps == 0 means the machine epsilon of x's dtype (PyTorch's eps=None);
// a nil Weight means no scale (elementwise_affine=False). It is composed
// of autograd's element-wise ops and a mean, so it is differentiated like
// them; it keeps a few (…, dim) intermediates for backward, more than a
// fused kernel would.
type RMSNorm struct {
	Weight *Parameter
	Eps    float64
}

// NewRMSNorm makes an RMSNorm of width dim with weight 1 and Eps 0 (the
// dtype's machine epsilon). Errors as NewLinear (dim must be > 0), and a
// half-precision dtype is refused as by NewLayerNorm.
func NewRMSNorm(o Options, name string, dim int) (*RMSNorm, error) {
	const op = "NewRMSNorm"
	o, err := o.resolve(op, name, "dim", dim)
	if err == nil {
		err = o.fullPrecision(op, name)
	}
	if err != nil {
		return nil, err
	}
	w, err := newParam(o, prefix(name, "weight"), memory.RoleParameter, constInit(1), dim)
	if err != nil {
		return nil, err
	}
	return &RMSNorm{Weight: w}, nil
}

// Forward normalises x (..., dim). Panics with a *tensor.OpError when x is
// nil, Eps is negative or NaN, or x's last axis is not the weight's width
// (a last axis of 1 is not broadcast: torch.nn.RMSNorm refuses it too).
func (n *RMSNorm) Forward(x *autograd.Var) *autograd.Var {
	needModule("nn.RMSNorm", "RMSNorm", n == nil)
	needVar("nn.RMSNorm", "x", x)
	eps := n.Eps
	if !(eps >= 0) {
		panic(&tensor.OpError{Op: "nn.RMSNorm", Msg: fmt.Sprintf("eps = %v, want >= 0", eps), Err: tensor.ErrArgument})
	}
	// The weight would broadcast against a last axis of 1: refused as
	// torch.nn.RMSNorm refuses it.
	if s := x.Value.Shape(); n.Weight != nil && (len(s) == 0 || s[len(s)-1] != n.Weight.Value.Numel()) {
		panic(&tensor.OpError{Op: "nn.RMSNorm", Msg: fmt.Sprintf("input %v for a norm of width %d: want (..., %d)", s, n.Weight.Value.Numel(), n.Weight.Value.Numel()), Err: tensor.ErrShape})
	}
	if eps == 0 {
		eps = machineEps(x.Value.DType())
	}
	ms := autograd.Mean(autograd.Mul(x, x), true, -1) // (..., 1)
	y := autograd.Div(x, autograd.Sqrt(autograd.Affine(ms, 1, eps)))
	if n.Weight != nil {
		y = autograd.Mul(y, n.Weight.Var)
	}
	return y
}

// Parameters returns the weight (none when it is nil).
func (n *RMSNorm) Parameters() []*Parameter {
	if n.Weight == nil {
		return nil
	}
	return []*Parameter{n.Weight}
}

// machineEps is torch.finfo(dt).eps: the distance from 1 to the next
// representable value.
func machineEps(dt tensor.DType) float64 {
	switch dt {
	case tensor.Float64:
		return math.Ldexp(1, -52)
	case tensor.Float16:
		return math.Ldexp(1, -10)
	case tensor.BFloat16:
		return math.Ldexp(1, -7)
	}
	return math.Ldexp(1, -23)
}
