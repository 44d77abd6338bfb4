package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Linear is y = x Wᵀ + b with W of shape (out, in), as torch.nn.Linear.
type Linear struct {
	Weight, Bias *Parameter
}

// NewLinear makes a Linear from in to out features (no bias when bias is
// false). With std > 0 the weights are normal(0, std) and the bias zero
// (GPT-2's initialisation); with std == 0 both are PyTorch's default for
// torch.nn.Linear, uniform(−1/√in, 1/√in). It returns an error wrapping
// tensor.ErrArgument when in or out is not positive or std is negative or
// NaN, and the memory error when the parameters do not fit.
func NewLinear(o Options, name string, in, out int, bias bool, std float64) (*Linear, error) {
	const op = "NewLinear"
	o, err := o.resolve(op, name, "in", in, "out", out)
	if err == nil && !(std >= 0 && !math.IsInf(std, 1)) {
		err = argError(op, name, "std = %v, want finite and >= 0", std)
	}
	if err != nil {
		return nil, err
	}
	wInit, bInit := normalInit(o.Rng, std), constInit(0)
	if std == 0 {
		k := 1 / math.Sqrt(float64(in))
		wInit, bInit = uniformInit(o.Rng, -k, k), uniformInit(o.Rng, -k, k)
	}
	w, err := newParam(o, prefix(name, "weight"), memory.RoleParameter, wInit, out, in)
	if err != nil {
		return nil, err
	}
	l := &Linear{Weight: w}
	if bias {
		if l.Bias, err = newParam(o, prefix(name, "bias"), memory.RoleParameter, bInit, out); err != nil {
			Release(l.Parameters())
			return nil, err
		}
	}
	return l, nil
}

// Forward maps x (..., in) to (..., out).
func (l *Linear) Forward(x *autograd.Var) *autograd.Var {
	return autograd.Linear(x, l.weight(), l.bias())
}

// ForwardHalf is Forward for an output whose only consumer takes it in
// the autocast dtype anyway (autograd.LinearHalf): under autocast it is
// returned in the region's dtype, its bias added in that dtype.
func (l *Linear) ForwardHalf(x *autograd.Var) *autograd.Var {
	return autograd.LinearHalf(x, l.weight(), l.bias())
}

// weight is the weight's var. A Linear without one (a nil *Linear, or a
// literal without its Weight) panics with an *tensor.OpError wrapping
// tensor.ErrArgument, as Block.Forward does for a missing sublayer,
// where reading the field was a nil-pointer panic that tensor.Try
// passes on.
func (l *Linear) weight() *autograd.Var {
	if l == nil || l.Weight == nil || l.Weight.Var == nil {
		panic(&tensor.OpError{Op: "nn.Linear", Msg: "no Weight: a nil *Linear, or a literal without its Weight", Err: tensor.ErrArgument})
	}
	return l.Weight.Var
}

// bias is the bias's var, nil for a Linear without one.
func (l *Linear) bias() *autograd.Var { return paramVar(l.Bias) }

// Parameters returns weight and bias.
func (l *Linear) Parameters() []*Parameter {
	if l.Bias == nil {
		return []*Parameter{l.Weight}
	}
	return []*Parameter{l.Weight, l.Bias}
}

// Embedding maps int32 ids to rows of a (num, dim) table.
type Embedding struct {
	Weight *Parameter
}

// NewEmbedding makes a (num, dim) embedding table with normal(0, std)
// entries; std == 0 means PyTorch's default for torch.nn.Embedding,
// normal(0, 1). Its storage has role embedding (the hybrid policy puts it
// in managed memory advised read-mostly on the GPU). Errors as NewLinear.
func NewEmbedding(o Options, name string, num, dim int, std float64) (*Embedding, error) {
	const op = "NewEmbedding"
	o, err := o.resolve(op, name, "num", num, "dim", dim)
	if err == nil && !(std >= 0 && !math.IsInf(std, 1)) {
		err = argError(op, name, "std = %v, want finite and >= 0", std)
	}
	if err != nil {
		return nil, err
	}
	if std == 0 {
		std = 1
	}
	w, err := newParam(o, prefix(name, "weight"), memory.RoleEmbedding, normalInit(o.Rng, std), num, dim)
	if err != nil {
		return nil, err
	}
	return &Embedding{Weight: w}, nil
}

// Forward gathers the rows for ids (any shape) into ids.shape + [dim].
func (e *Embedding) Forward(ids *tensor.Tensor) *autograd.Var {
	if e == nil || e.Weight == nil || e.Weight.Var == nil { // as Linear.weight
		panic(&tensor.OpError{Op: "nn.Embedding", Msg: "no Weight: a nil *Embedding, or a literal without its Weight", Err: tensor.ErrArgument})
	}
	return autograd.Embedding(e.Weight.Var, ids)
}

// Parameters returns the table.
func (e *Embedding) Parameters() []*Parameter { return []*Parameter{e.Weight} }

// LayerNorm normalises over the last axis with a learnt scale and shift.
// A nil Bias means no shift (nanoGPT's LayerNorm(ndim, bias=False)), a
// nil Weight no scale (elementwise_affine=False).
type LayerNorm struct {
	Weight, Bias *Parameter
	Eps          float64
}

// NewLayerNorm makes a LayerNorm of width dim (weight 1, bias 0, eps
// 1e-5, as torch.nn.LayerNorm). Errors as NewLinear (dim must be > 0);
// a half-precision dtype (bfloat16, float16) is an error too, since the
// norm computes in float32 or float64: keep float32 parameters and use
// amp.Autocast for half-precision compute.
func NewLayerNorm(o Options, name string, dim int) (*LayerNorm, error) {
	const op = "NewLayerNorm"
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
	b, err := newParam(o, prefix(name, "bias"), memory.RoleParameter, constInit(0), dim)
	if err != nil {
		Release([]*Parameter{w})
		return nil, err
	}
	return &LayerNorm{Weight: w, Bias: b, Eps: 1e-5}, nil
}

// Forward normalises x (..., dim). Panics with a *tensor.OpError when Eps
// is negative or NaN (as RMSNorm does: every constant row would be NaN)
// or the shapes disagree.
func (l *LayerNorm) Forward(x *autograd.Var) *autograd.Var {
	eps := l.eps() // first: it refuses a nil l, which l.Weight would dereference
	return autograd.LayerNorm(x, paramVar(l.Weight), paramVar(l.Bias), eps)
}

// ForwardToProducts is Forward for an output that feeds only matrix
// products (autograd.LayerNormHalf): under autocast it is written in the
// region's dtype, the same bits the products would cast it to.
func (l *LayerNorm) ForwardToProducts(x *autograd.Var) *autograd.Var {
	eps := l.eps() // first: it refuses a nil l, which l.Weight would dereference
	return autograd.LayerNormHalf(x, paramVar(l.Weight), paramVar(l.Bias), eps)
}

// eps is Eps, refused when it is negative or NaN; a nil *LayerNorm is
// refused too (a nil-pointer panic before, which tensor.Try passes on;
// a LayerNorm without Weight and Bias is one without the affine part).
func (l *LayerNorm) eps() float64 {
	if l == nil {
		panic(&tensor.OpError{Op: "nn.LayerNorm", Msg: "a nil *LayerNorm (one without Weight and Bias normalises without the affine part)", Err: tensor.ErrArgument})
	}
	if !(l.Eps >= 0) {
		panic(&tensor.OpError{Op: "nn.LayerNorm", Msg: fmt.Sprintf("eps = %v, want >= 0", l.Eps), Err: tensor.ErrArgument})
	}
	return l.Eps
}

// Parameters returns weight and bias (those that are not nil).
func (l *LayerNorm) Parameters() []*Parameter {
	var ps []*Parameter
	for _, p := range []*Parameter{l.Weight, l.Bias} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// paramVar is p's var, nil for a nil (absent) parameter.
func paramVar(p *Parameter) *autograd.Var {
	if p == nil {
		return nil
	}
	return p.Var
}

// Dropout zeroes activations with probability P while training. The mask
// of a call is a function of Seed and an offset drawn from the random
// stream of the input's context (autograd.RandomOffset): runs are
// reproducible, and the module holds no mutable state: a model may be shared between goroutines,
// each with its own stream, and activation checkpointing replays the same
// masks by restoring the stream.
type Dropout struct {
	P        float64
	Seed     uint64
	Training bool
}

// Forward applies dropout when training and P > 0. A nil *Dropout (a
// CausalSelfAttention or Block written as a literal without one) is no
// dropout.
func (d *Dropout) Forward(x *autograd.Var) *autograd.Var {
	needVar("nn.Dropout", "x", x)
	p, seed, off := d.next(x.Value.Ctx(), x.Value.Numel())
	if p == 0 {
		return x
	}
	return autograd.Dropout(x, p, seed, off)
}

// next returns the probability to apply to n elements (0 when not
// training, or d is nil), the seed and the mask offset for them, drawn
// from c's random stream.
func (d *Dropout) next(c *tensor.Ctx, n int) (p float64, seed, off uint64) {
	if d == nil || !d.Training || d.P == 0 {
		return 0, 0, 0
	}
	return d.P, d.Seed, autograd.RandomOffset(c, n)
}

// Parameters returns none: dropout has no parameters.
func (d *Dropout) Parameters() []*Parameter { return nil }

// ReLU is the activation max(x, 0), PyTorch's nn.ReLU (Func(ReLU) is the
// layer).
func ReLU(x *autograd.Var) *autograd.Var { return autograd.Relu(x) }

// GELU is the tanh-approximated GELU activation.
func GELU(x *autograd.Var) *autograd.Var { return autograd.Gelu(x) }

// SiLU is the SiLU (swish) activation x·sigmoid(x), PyTorch's nn.SiLU
// (Func(SiLU) is the layer).
func SiLU(x *autograd.Var) *autograd.Var { return autograd.Silu(x) }

// CrossEntropy is the mean cross-entropy of logits (..., C) against int32
// targets of the leading shape; targets equal to autograd.IgnoreIndex are
// skipped.
func CrossEntropy(logits *autograd.Var, targets *tensor.Tensor) *autograd.Var {
	if logits == nil || logits.Value == nil || targets == nil {
		panic(&tensor.OpError{Op: "nn.CrossEntropy", Msg: fmt.Sprintf("logits or targets are nil (logits nil: %v, targets nil: %v)", logits == nil || logits.Value == nil, targets == nil), Err: tensor.ErrArgument})
	}
	s := logits.Value.Shape()
	if len(s) == 0 {
		panic(&tensor.OpError{Op: "nn.CrossEntropy", Msg: "logits are a scalar: want (..., C)", Err: tensor.ErrShape})
	}
	if ts := targets.Shape(); !slices.Equal(ts, s[:len(s)-1]) {
		panic(&tensor.OpError{Op: "nn.CrossEntropy", Msg: fmt.Sprintf("targets %v for logits %v: want the logits' leading shape %v", ts, s, s[:len(s)-1]), Err: tensor.ErrShape})
	}
	c := s[len(s)-1]
	flat := autograd.Reshape(logits, -1, c)
	return autograd.CrossEntropy(flat, targets.Reshape(-1))
}
