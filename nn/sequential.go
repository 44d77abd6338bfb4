package nn

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Layer is a module that maps one var to another: what Sequential chains.
// Linear, LayerNorm, RMSNorm, Dropout, Func, Sequential and GPT's MLP are
// layers.
type Layer interface {
	Module
	Forward(x *autograd.Var) *autograd.Var
}

// Func is a layer without parameters made from a function, the way to put
// an activation in a Sequential: Func(ReLU), Func(SiLU), Func(GELU),
// Func(autograd.Tanh).
type Func func(x *autograd.Var) *autograd.Var

// Forward applies f.
func (f Func) Forward(x *autograd.Var) *autograd.Var { return f(x) }

// Parameters returns none.
func (Func) Parameters() []*Parameter { return nil }

// Sequential applies its layers in order, as torch.nn.Sequential.
type Sequential struct {
	Layers []Layer
}

// NewSequential chains layers and names their parameters as
// torch.nn.Sequential's state_dict does: parameter "weight" of layer i
// becomes "name.i.weight" ("i.weight" when name is empty). The
// parameters are renamed in place, so a layer belongs to one Sequential;
// build the layers with an empty name to get PyTorch's keys (a layer built
// as "fc" gives "name.i.fc.weight"). Layers without parameters (Func,
// Dropout) take an index too, as in PyTorch. Sequentials nest: the inner
// one's names are prefixed again. It returns an error wrapping
// tensor.ErrArgument for a nil layer, one with a nil parameter (a Linear
// literal without its Weight) or one whose parameters appear twice (the
// same layer given twice).
func NewSequential(name string, layers ...Layer) (*Sequential, error) {
	seen := map[*Parameter]bool{}
	for i, l := range layers {
		if isNil(l) {
			return nil, argError("NewSequential", name, "layer %d is nil", i)
		}
		for j, p := range l.Parameters() {
			if notNil(j, p) != nil { // a literal without its weight: renaming would crash
				return nil, argError("NewSequential", name, "layer %d (%T): parameter %d is nil", i, l, j)
			}
			if seen[p] {
				return nil, argError("NewSequential", name, "layer %d (%T): parameter %q appears twice", i, l, p.Name)
			}
			seen[p] = true
		}
	}
	for i, l := range layers {
		for _, p := range l.Parameters() {
			p.rename(prefix(name, prefix(strconv.Itoa(i), p.Name)))
		}
	}
	return &Sequential{Layers: layers}, nil
}

// isNil reports a nil layer or module, also a nil pointer or Func in the
// interface.
func isNil(m Module) bool {
	if m == nil {
		return true
	}
	switch v := reflect.ValueOf(m); v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// Forward applies every layer to x in turn. A nil layer (in a literal:
// NewSequential refuses one) panics with an *tensor.OpError wrapping
// tensor.ErrArgument that names its index, as a Block missing a sublayer
// does, instead of a nil-pointer panic that tensor.Try passes on.
func (s *Sequential) Forward(x *autograd.Var) *autograd.Var {
	needModule("nn.Sequential", "Sequential", s == nil)
	for i, l := range s.Layers {
		if isNil(l) {
			panic(&tensor.OpError{Op: "nn.Sequential", Msg: fmt.Sprintf("layer %d is nil", i), Err: tensor.ErrArgument})
		}
		x = l.Forward(x)
	}
	return x
}

// Parameters returns every layer's parameters, in order.
func (s *Sequential) Parameters() []*Parameter {
	var ps []*Parameter
	for _, l := range s.Layers {
		ps = append(ps, l.Parameters()...)
	}
	return ps
}

// NewFeedForward makes a multi-layer perceptron: Linear layers (with bias
// and PyTorch's default initialisation) from sizes[0] to sizes[1], …, to
// the last size, with act between them (not after the last; nil means
// ReLU), in a Sequential named name, so its parameters are
// name.0.weight, name.0.bias, name.2.weight, … as in PyTorch's
// Sequential(Linear, ReLU, Linear). It needs at least two sizes, all
// positive; errors as NewLinear otherwise.
func NewFeedForward(o Options, name string, act Func, sizes ...int) (*Sequential, error) {
	if len(sizes) < 2 {
		return nil, argError("NewFeedForward", name, "sizes %v: want at least two (in, out)", sizes)
	}
	if act == nil {
		act = ReLU
	}
	var layers []Layer
	for i := range len(sizes) - 1 {
		if i > 0 {
			layers = append(layers, act)
		}
		l, err := NewLinear(o, "", sizes[i], sizes[i+1], true, 0)
		if err != nil {
			Release(Collect(toModules(layers)...))
			return nil, fmt.Errorf("nn: NewFeedForward %q: layer %d: %w", name, i, err)
		}
		layers = append(layers, l)
	}
	return NewSequential(name, layers...)
}

func toModules(ls []Layer) []Module {
	ms := make([]Module, len(ls))
	for i, l := range ls {
		ms[i] = l
	}
	return ms
}

// check that the layer types satisfy Layer.
var (
	_ Layer = (*Linear)(nil)
	_ Layer = (*LayerNorm)(nil)
	_ Layer = (*RMSNorm)(nil)
	_ Layer = (*Dropout)(nil)
	_ Layer = (*MLP)(nil)
	_ Layer = (*Sequential)(nil)
	_ Layer = Func(nil)
)
