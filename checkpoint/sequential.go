package checkpoint

import "github.com/strata-ml/strata/autograd"

// Layer is one stage of a sequence: a transformer block's Forward, say.
type Layer func(x *autograd.Var) *autograd.Var

// Sequential is Options{}.Sequential.
func Sequential(every int, x *autograd.Var, layers ...Layer) *autograd.Var {
	return Options{}.Sequential(every, x, layers...)
}

// Sequential applies layers to x in order and checkpoints every k-th of
// them, k = every: the k-th, the 2k-th, ... (1-based, as torchtitan's
// activation-checkpointing frequency), each one region checkpointed with
// o. every = 1 checkpoints every layer; every <= 0 none.
func (o Options) Sequential(every int, x *autograd.Var, layers ...Layer) *autograd.Var {
	for i, l := range layers {
		if every > 0 && (i+1)%every == 0 {
			x = o.Apply(func(in ...*autograd.Var) *autograd.Var { return l(in[0]) }, x)
		} else {
			x = l(x)
		}
	}
	return x
}
