package nn

import (
	"fmt"
	"math/rand/v2"
	"sync"

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

// rename gives p a new full name: its Name, its var's (errors, anomaly
// reports) and its storage's label (placement plans, snapshots).
func (p *Parameter) rename(name string) {
	p.Name = name
	p.Var.SetName(name)
	p.Value.SetLabel(name)
}

// Module is anything with parameters.
type Module interface {
	Parameters() []*Parameter
}

// Options are what every layer constructor needs: where to put the
// parameters, their dtype, and the random source for initialisation.
//
// The zero Options is ready to use: a nil Device means the CPU, the zero
// DType is float32, and a nil Rng means the package's default stream, a
// fixed-seed source shared by every constructor called without one (safe
// for concurrent use). As with PyTorch's default generator, which also
// starts from a fixed seed, a program that builds its model on one
// goroutine gets the same weights on every run; set Rng to choose the
// seed or to make construction order irrelevant.
type Options struct {
	Device tensor.Device
	DType  tensor.DType
	Rng    *rand.Rand
}

// defaultRng is the stream of Options without a Rng.
var defaultRng = rand.New(&lockedSource{src: rand.NewPCG(0x5eed, 0x57a7a)})

// lockedSource serialises a source, so defaultRng may be drawn from by
// any goroutine.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (s *lockedSource) Uint64() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.src.Uint64()
}

// resolve fills in the defaults (CPU, the default stream) and checks the
// dtype (parameters are float32, float64, float16 or bfloat16; the layers
// that cannot run with half precision refuse it with fullPrecision), then the
// named sizes, pairs of a name and an int that must be > 0 (positive).
func (o Options) resolve(op, name string, sizes ...any) (Options, error) {
	if o.Device == nil {
		o.Device = tensor.CPU()
	}
	if o.Rng == nil {
		o.Rng = defaultRng
	}
	if !o.DType.IsFloat() {
		return o, argError(op, name, "dtype %v: want a floating-point dtype", o.DType)
	}
	return o, positive(op, name, sizes...)
}

// fullPrecision refuses half-precision parameters (bfloat16, float16) in
// the constructors of layers that cannot run with them: their ops
// compute in float32 and float64, so every Forward would fail. Mixed
// precision keeps float32 parameters and runs the products in the half
// type under amp.Autocast.
func (o Options) fullPrecision(op, name string) error {
	if o.DType.IsHalf() {
		return argError(op, name, "dtype %v: cannot run with half-precision parameters (the arithmetic is float32 or float64): keep float32 parameters and use amp.Autocast for %v compute", o.DType, o.DType)
	}
	return nil
}

// argError is a constructor's error for a bad argument; it wraps
// tensor.ErrArgument.
func argError(op, name, format string, args ...any) error {
	return fmt.Errorf("nn: %s %q: %s: %w", op, name, fmt.Sprintf(format, args...), tensor.ErrArgument)
}

// needVar panics with an *tensor.OpError wrapping tensor.ErrArgument when
// x, op's input what, is nil or has no value (as autograd's ops do), so
// that tensor.Try and Step return it instead of a nil dereference.
func needVar(op, what string, x *autograd.Var) {
	if x == nil || x.Value == nil {
		panic(&tensor.OpError{Op: op, Msg: what + " is a nil *autograd.Var", Err: tensor.ErrArgument})
	}
}

// needModule panics with an *tensor.OpError wrapping tensor.ErrArgument
// when a module's receiver is nil (module names its type), where reading
// its fields was a nil-pointer panic that tensor.Try passes on.
func needModule(op, module string, isNil bool) {
	if isNil {
		panic(&tensor.OpError{Op: op, Msg: "a nil *" + module + " (make it with its New function)", Err: tensor.ErrArgument})
	}
}

// positive checks sizes: each named value must be > 0.
func positive(op, name string, kv ...any) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if v := kv[i+1].(int); v <= 0 {
			return argError(op, name, "%s = %d, want > 0", kv[i], v)
		}
	}
	return nil
}

// newParam allocates a parameter with role and fills it with init. It
// uses a context of its own, so models may be built on any goroutine.
// Running out of memory (or a failing init) is returned as an error.
func newParam(o Options, name string, role memory.Role, init func(*tensor.Ctx, *tensor.Tensor), shape ...int) (*Parameter, error) {
	t, err := tensor.NewKept(o.Device, o.DType, role, shape...)
	if err != nil {
		return nil, err
	}
	c := tensor.NewCtx()
	if err := tensor.Try(func() { c.WithScope(func() { init(c, t) }) }); err != nil {
		t.Release()
		return nil, err
	}
	t.SetLabel(name) // the memory manager's plans and snapshots name it
	return &Parameter{Var: autograd.Param(t, name), Name: name, Decay: len(shape) >= 2}, nil
}

// Must returns v, or panics when err is not nil: for programs and tests
// that treat a bad constructor argument as a bug, as template.Must does.
//
//	fc := nn.Must(nn.NewLinear(nn.Options{}, "fc", 2, 8, true, 0))
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// buildError carries a constructor's error through build.
type buildError struct{ err error }

// build runs fn, which composes constructors with must, and returns the
// first error they returned (or an *tensor.OpError fn panicked with).
func build(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if b, ok := r.(buildError); ok {
				err = b.err
				return
			}
			panic(r)
		}
	}()
	return tensor.Try(fn)
}

// must is Must inside build.
func must[T any](v T, err error) T {
	if err != nil {
		panic(buildError{err})
	}
	return v
}

// normalInit fills with normal(0, std) from rng (drawn on the host, so the
// same seed gives the same weights on every device).
func normalInit(rng *rand.Rand, std float64) func(*tensor.Ctx, *tensor.Tensor) {
	return func(c *tensor.Ctx, t *tensor.Tensor) {
		t.CopyFrom(c.RandN(t.Device(), t.DType(), rng, std, t.Shape()...))
	}
}

// uniformInit fills with uniform [lo, hi) samples from rng (on the host).
func uniformInit(rng *rand.Rand, lo, hi float64) func(*tensor.Ctx, *tensor.Tensor) {
	return func(c *tensor.Ctx, t *tensor.Tensor) {
		t.CopyFrom(c.RandUniform(t.Device(), t.DType(), rng, lo, hi, t.Shape()...))
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

// Collect returns the parameters of several modules, in order. A nil
// module is skipped, also a nil pointer in the interface (an optional
// layer left nil: Collect(body, head) with a nil *Linear head), whose
// Parameters would dereference it.
func Collect(ms ...Module) []*Parameter {
	var ps []*Parameter
	for _, m := range ms {
		if !isNil(m) {
			ps = append(ps, m.Parameters()...)
		}
	}
	return ps
}

// CountParams is the number of elements in ps. Nil entries (a list
// written by hand with a bias-less Linear's Bias) count nothing, as in
// ZeroGrad and Release.
func CountParams(ps []*Parameter) int {
	n := 0
	for _, p := range ps {
		if p != nil && p.Var != nil && p.Value != nil {
			n += p.Value.Numel()
		}
	}
	return n
}

// ZeroGrad releases every parameter's gradient (set_to_none). Nil
// entries are skipped, as Collect skips nil modules.
func ZeroGrad(ps []*Parameter) {
	for _, p := range ps {
		if p != nil && p.Var != nil {
			p.ZeroGrad()
		}
	}
}

// Release frees the parameters and their gradients. Nil entries are
// skipped, so that a deferred Release of a list holding one still frees
// the rest.
func Release(ps []*Parameter) {
	for _, p := range ps {
		if p != nil && p.Var != nil {
			p.ZeroGrad()
			p.Value.Release()
		}
	}
}

// ByName indexes parameters by name; duplicate names are an error, and
// so is a nil entry (both wrapping tensor.ErrArgument).
func ByName(ps []*Parameter) (map[string]*Parameter, error) {
	m := make(map[string]*Parameter, len(ps))
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return nil, fmt.Errorf("nn: %w", err)
		}
		if _, dup := m[p.Name]; dup {
			return nil, fmt.Errorf("nn: duplicate parameter name %q: %w", p.Name, tensor.ErrArgument)
		}
		m[p.Name] = p
	}
	return m, nil
}
