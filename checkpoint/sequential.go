package checkpoint

import (
	"fmt"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// Layer is one stage of a sequence: a transformer block's Forward, say.
type Layer func(x *autograd.Var) *autograd.Var

// Sequential is Options{}.Sequential.
func Sequential(every int, x *autograd.Var, layers ...Layer) *autograd.Var {
	return Options{}.Sequential(every, x, layers...)
}

// Sequential applies layers to x in order and checkpoints every k-th of
// them, k = every: the k-th, the 2k-th, ... (1-based, as torchtitan's
// activation-checkpointing frequency), each one region checkpointed with
// o. every = 1 checkpoints every layer; every <= 0 none. A nil layer is
// an *tensor.OpError wrapping tensor.ErrArgument (a panic, before any
// layer runs).
func (o Options) Sequential(every int, x *autograd.Var, layers ...Layer) *autograd.Var {
	for i, l := range layers {
		if l == nil {
			panic(&tensor.OpError{Op: "checkpoint.Sequential", Msg: fmt.Sprintf("layer %d is nil", i), Err: tensor.ErrArgument})
		}
	}
	for i, l := range layers {
		if every > 0 && (i+1)%every == 0 {
			x = o.Apply(func(in ...*autograd.Var) *autograd.Var { return l(in[0]) }, x)
		} else {
			x = l(x)
		}
	}
	return x
}
