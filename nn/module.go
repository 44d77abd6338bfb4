package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Parameter is a trainable (or frozen) tensor of a module: a leaf var with
// a dotted name (PyTorch's state_dict key) and the memory role its
// storage was placed by.
type Parameter struct {
	*autograd.Var
	// Name is the full dotted name, e.g. "transformer.h.0.attn.c_attn.weight".
	Name string
	// Decay says whether weight decay applies (2-D weights, as nanoGPT).
	Decay bool
}

// Module is anything with parameters.
type Module interface {
	Parameters() []*Parameter
}

// Options are what every layer constructor needs: where to put the
// parameters, their dtype, and the random source for initialisation.
type Options struct {
	Device tensor.Device
	DType  tensor.DType
	Rng    *rand.Rand
}

func (o Options) check() {
	if o.Device == nil || o.Rng == nil {
		panic("nn: Options needs a Device and a Rng")
	}
}

// newParam allocates a parameter with role and fills it with init. It
// uses a context of its own, so models may be built on any goroutine.
func newParam(o Options, name string, role memory.Role, init func(*tensor.Ctx, *tensor.Tensor), shape ...int) *Parameter {
	o.check()
	t, err := tensor.NewKept(o.Device, o.DType, role, shape...)
	if err != nil {
		panic(err)
	}
	c := tensor.NewCtx()
	c.WithScope(func() { init(c, t) })
	return &Parameter{Var: autograd.Param(t, name), Name: name, Decay: len(shape) >= 2}
}

// normalInit fills with normal(0, std) from rng (drawn on the host, so the
// same seed gives the same weights on every device).
func normalInit(rng *rand.Rand, std float64) func(*tensor.Ctx, *tensor.Tensor) {
	return func(c *tensor.Ctx, t *tensor.Tensor) {
		t.CopyFrom(c.RandN(t.Device(), t.DType(), rng, std, t.Shape()...))
	}
}

func constInit(v float64) func(*tensor.Ctx, *tensor.Tensor) {
	return func(_ *tensor.Ctx, t *tensor.Tensor) { t.Fill(v) }
}

// prefix joins name parts with dots.
func prefix(p, name string) string {
	if p == "" {
		return name
	}
	return p + "." + name
}

// Collect returns the parameters of several modules, in order.
func Collect(ms ...Module) []*Parameter {
	var ps []*Parameter
	for _, m := range ms {
		if m != nil {
			ps = append(ps, m.Parameters()...)
		}
	}
	return ps
}

// CountParams is the number of elements in ps.
func CountParams(ps []*Parameter) int {
	n := 0
	for _, p := range ps {
		n += p.Value.Numel()
	}
	return n
}

// ZeroGrad releases every parameter's gradient (set_to_none).
func ZeroGrad(ps []*Parameter) {
	for _, p := range ps {
		p.ZeroGrad()
	}
}

// Release frees the parameters and their gradients.
func Release(ps []*Parameter) {
	for _, p := range ps {
		p.ZeroGrad()
		p.Value.Release()
	}
}

// ByName indexes parameters by name; duplicate names are an error.
func ByName(ps []*Parameter) (map[string]*Parameter, error) {
	m := make(map[string]*Parameter, len(ps))
	for _, p := range ps {
		if _, dup := m[p.Name]; dup {
			return nil, fmt.Errorf("nn: duplicate parameter name %q", p.Name)
		}
		m[p.Name] = p
	}
	return m, nil
}
