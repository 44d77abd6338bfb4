package checkpoint_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// net is a small stack of the hooked ops with dropout: parameters closed
// over by the checkpointed functions.
type net struct {
	lnW, lnB, w1, b1, w2, b2, w3 *autograd.Var
}

const width = 8

func newNet(seed uint64) *net {
	rng := rand.New(rand.NewPCG(seed, 3))
	p := func(std float64, shape ...int) *autograd.Var {
		t, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, shape...)
		if err != nil {
			panic(err)
		}
		c := tensor.NewCtx()
		c.WithScope(func() { t.CopyFrom(c.RandN(tensor.CPU(), tensor.Float32, rng, std, shape...)) })
		return autograd.Param(t, "p")
	}
	return &net{
		lnW: p(0.1, width), lnB: p(0.1, width),
		w1: p(0.3, 4*width, width), b1: p(0.1, 4*width),
		w2: p(0.3, width, 4*width), b2: p(0.1, width),
		w3: p(0.3, width, width),
	}
}

func (n *net) params() []*autograd.Var {
	return []*autograd.Var{n.lnW, n.lnB, n.w1, n.b1, n.w2, n.b2, n.w3}
}

func (n *net) release() {
	for _, p := range n.params() {
		p.ZeroGrad()
		p.Value.Release()
	}
}

// block is x + dropout(MLP(LN(x))) @ w3, then a causal attention of the
// result with itself: every hooked op, and two random draws.
func (n *net) block(x *autograd.Var) *autograd.Var {
	c := x.Value.Ctx()
	h := autograd.LayerNorm(x, n.lnW, n.lnB, 1e-5)
	h = autograd.GeluLinear(autograd.Linear(h, n.w1, n.b1), n.w2, n.b2)
	h = autograd.Dropout(h, 0.25, 11, autograd.RandomOffset(c, h.Value.Numel()))
	h = autograd.MatMul(h, autograd.Transpose(n.w3, 0, 1))
	x = autograd.Add(x, h)
	s := x.Value.Shape() // (B, T, C): one head of width C
	q := autograd.Reshape(x, s[0], 1, s[1], s[2])
	a := autograd.CausalAttention(q, q, q, 0.1, 12, autograd.RandomOffset(c, s[0]*s[1]*s[1]))
	return autograd.Add(x, autograd.Reshape(a, s...))
}

// result is what a run produced, as bits.
type result struct {
	loss  uint32
	grads [][]float32 // the parameters', then the input's
	rng   uint64      // the context's random stream after the step
}

// run computes loss = Σ r·f(x) in context c and back-propagates it.
// wrap applies the blocks to x (checkpointed or not).
func run(t *testing.T, c *tensor.Ctx, n *net, inputGrad bool, wrap func(x *autograd.Var) *autograd.Var) result {
	t.Helper()
	var res result
	err := tensor.Try(func() {
		c.WithScope(func() {
			rng := rand.New(rand.NewPCG(5, 6))
			xv := c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 5, width)
			r := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rng, 1, 2, 5, width))
			x := autograd.Const(xv)
			if inputGrad {
				x = x.Detach()
				x.SetRequiresGrad(true)
			}
			y := wrap(x)
			loss := autograd.Sum(autograd.Mul(y, r), false)
			require.NoError(t, loss.Backward())
			res.loss = math.Float32bits(loss.Value.Float32s()[0])
			for _, p := range n.params() {
				require.NotNil(t, p.Grad)
				res.grads = append(res.grads, p.Grad.Float32s())
				p.ZeroGrad()
			}
			if inputGrad {
				require.NotNil(t, x.Grad, "the input's gradient")
				res.grads = append(res.grads, x.Grad.Float32s())
				x.ZeroGrad()
			}
			res.rng = autograd.RandomState(c)
		})
	})
	require.NoError(t, err)
	return res
}

func sameBits(t *testing.T, want, got result, what string) {
	t.Helper()
	require.Equal(t, want.loss, got.loss, "%s: loss", what)
	require.Equal(t, want.rng, got.rng, "%s: random stream after the step", what)
	require.Len(t, got.grads, len(want.grads), what)
	for i := range want.grads {
		for j := range want.grads[i] {
			if math.Float32bits(want.grads[i][j]) != math.Float32bits(got.grads[i][j]) {
				t.Fatalf("%s: gradient %d element %d: %v, want %v (bit-identical)", what, i, j, got.grads[i][j], want.grads[i][j])
			}
		}
	}
}

// TestMatchesPlain: every kind of region gives the loss, every gradient
// (parameters and input) and the random stream of the plain run, bit for
// bit, with dropout on; and the function runs again only in backward.
func TestMatchesPlain(t *testing.T) {
	n := newNet(1)
	defer n.release()
	base := tensor.CPU().Memory().InUse()
	two := func(x *autograd.Var) *autograd.Var { return n.block(n.block(x)) }
	for _, inputGrad := range []bool{true, false} {
		c := tensor.NewCtx()
		autograd.SetRandomState(c, 100)
		want := run(t, c, n, inputGrad, two)
		cases := []struct {
			name string
			wrap func(x *autograd.Var) *autograd.Var
		}{
			{"each block", func(x *autograd.Var) *autograd.Var {
				return checkpoint.Sequential(1, x, n.block, n.block)
			}},
			{"every 2nd block", func(x *autograd.Var) *autograd.Var {
				return checkpoint.Sequential(2, x, n.block, n.block)
			}},
			{"one region of two blocks", func(x *autograd.Var) *autograd.Var {
				return checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return two(in[0]) }, x)
			}},
			{"nested", func(x *autograd.Var) *autograd.Var {
				return checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
					return checkpoint.Sequential(1, in[0], n.block, n.block)
				}, x)
			}},
			{"selective", func(x *autograd.Var) *autograd.Var {
				return checkpoint.Options{Policy: checkpoint.SaveMatMuls}.Sequential(1, x, n.block, n.block)
			}},
			{"selective, saving everything", func(x *autograd.Var) *autograd.Var {
				all := checkpoint.SaveOps("MatMul", "Linear", "GeluLinear", "Gelu", "CausalAttention", "LayerNorm")
				return checkpoint.Options{Policy: all}.Sequential(1, x, n.block, n.block)
			}},
			{"selective nested in selective", func(x *autograd.Var) *autograd.Var {
				o := checkpoint.Options{Policy: checkpoint.SaveOps("Gelu", "LayerNorm")}
				return o.Apply(func(in ...*autograd.Var) *autograd.Var {
					return checkpoint.Options{Policy: checkpoint.SaveMatMuls}.Sequential(1, in[0], n.block, n.block)
				}, x)
			}},
		}
		for _, tc := range cases {
			c := tensor.NewCtx()
			autograd.SetRandomState(c, 100)
			got := run(t, c, n, inputGrad, tc.wrap)
			sameBits(t, want, got, tc.name)
			require.Zero(t, c.BytesInUse(), "%s: bytes left in the context", tc.name)
		}
	}
	require.Equal(t, base, tensor.CPU().Memory().InUse())
}

// TestRecomputedOnlyInBackward: the function runs once in the forward
// pass, again when backward reaches the region, and never for a region
// backward does not reach.
func TestRecomputedOnlyInBackward(t *testing.T) {
	n := newNet(2)
	defer n.release()
	c := tensor.NewCtx()
	calls := 0
	f := func(in ...*autograd.Var) *autograd.Var { calls++; return n.block(in[0]) }
	c.WithScope(func() {
		x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(1, 1)), 1, 1, 3, width))
		y := checkpoint.Apply(f, x)
		unused := checkpoint.Apply(f, x)
		require.Equal(t, 2, calls)
		require.True(t, y.RequiresGrad(), "parameters inside need gradients although the input does not")
		require.True(t, unused.RequiresGrad())
		loss := autograd.Sum(y, false)
		require.Equal(t, 2, calls, "nothing recomputed before backward")
		require.NoError(t, loss.Backward())
		require.Equal(t, 3, calls, "one recomputation, of the region backward reached")
		for _, p := range n.params() {
			require.NotNil(t, p.Grad)
			p.ZeroGrad()
		}
	})
	require.Zero(t, c.BytesInUse())
}

// TestNothingNeedsGradient: a region in which nothing needs a gradient
// (frozen parameters, constant input) returns a plain value; under
// NoGradIn Apply is the function itself.
func TestNothingNeedsGradient(t *testing.T) {
	n := newNet(3)
	defer n.release()
	for _, p := range n.params() {
		p.SetRequiresGrad(false)
	}
	c := tensor.NewCtx()
	calls := 0
	f := func(in ...*autograd.Var) *autograd.Var { calls++; return n.block(in[0]) }
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 1, 3, width))
		y := checkpoint.Apply(f, x)
		require.False(t, y.RequiresGrad())
		require.True(t, y.IsLeaf())
		require.False(t, y.Value.Released())
		require.Equal(t, c, y.Value.Ctx())
		autograd.NoGradIn(c, func() { checkpoint.Apply(f, x) })
		require.Equal(t, 2, calls)
		// The identity has nothing to recompute: its input comes back.
		require.Same(t, x, checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var { return in[0] }, x))
	})
	require.Zero(t, c.BytesInUse())
}

// TestStateReplayed: the recomputation sees the autocast state and the
// random stream of the forward pass, and both are put back afterwards.
func TestStateReplayed(t *testing.T) {
	c := tensor.NewCtx()
	w := autograd.Param(c.Ones(tensor.CPU(), tensor.Float32, 4), "w")
	defer func() {
		w.ZeroGrad() // backward left w's gradient, kept out of every scope
		w.Value.Release()
	}()
	var seen, inBackward []amp.State
	var offs []uint64
	f := func(in ...*autograd.Var) *autograd.Var {
		seen = append(seen, amp.Current(c))
		offs = append(offs, autograd.RandomOffset(c, 10))
		y := autograd.Mul(in[0], w)
		return autograd.Record("Spy", y.Value.Alias(), []*autograd.Var{y}, func(g *tensor.Tensor) []*tensor.Tensor {
			inBackward = append(inBackward, amp.Current(c))
			return []*tensor.Tensor{g.Alias()}
		})
	}
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 4))
		var y *autograd.Var
		amp.Autocast(c, tensor.BFloat16, func() { y = checkpoint.Apply(f, x) })
		autograd.RandomOffset(c, 5)
		require.Equal(t, uint64(15), autograd.RandomState(c))
		require.NoError(t, autograd.Sum(y, false).Backward())
		require.Equal(t, uint64(15), autograd.RandomState(c), "the stream is put back")
		require.Equal(t, amp.State{}, amp.Current(c), "the autocast state is put back")
	})
	require.Equal(t, []amp.State{{Enabled: true, DType: tensor.BFloat16}, {Enabled: true, DType: tensor.BFloat16}}, seen)
	require.Equal(t, []uint64{0, 0}, offs)
	require.Equal(t, []amp.State{{}}, inBackward, "the recomputed graph's backward runs outside the region's autocast, as the plain graph's")
}

// TestWeightCopiesFreedWithTheRegion: under autocast, the bf16 copy of a
// weight that a checkpointed region's forward pass cast is freed when the
// region returns, not held by the enclosing autocast region until it
// closes (the recomputation casts its own); the gradients are those of the
// plain run, bit for bit.
func TestWeightCopiesFreedWithTheRegion(t *testing.T) {
	const n = 256 // the weight's bf16 copy: 128 KiB
	rng := rand.New(rand.NewPCG(7, 8))
	wt, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, n, n)
	require.NoError(t, err)
	w := autograd.Param(wt, "w")
	defer func() {
		w.ZeroGrad()
		w.Value.Release()
	}()
	c := tensor.NewCtx()
	c.WithScope(func() { wt.CopyFrom(c.RandN(tensor.CPU(), tensor.Float32, rng, 0.1, n, n)) })
	f := func(in ...*autograd.Var) *autograd.Var {
		return autograd.Linear(in[0], w, nil)
	}
	allocated := func() int64 { return tensor.CPU().Memory().Stats().Total.Allocated.Current }
	grads := func(checkpointed bool) (held int64, g []float32) {
		c.WithScope(func() {
			x := autograd.Const(c.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(1, 2)), 1, 2, n))
			var y *autograd.Var
			amp.Autocast(c, tensor.BFloat16, func() {
				before := allocated()
				if checkpointed {
					y = checkpoint.Apply(f, x)
				} else {
					y = f(x)
				}
				held = allocated() - before
			})
			require.NoError(t, autograd.Sum(y, false).Backward())
			g = w.Grad.Float32s()
			w.ZeroGrad()
		})
		return held, g
	}
	plainHeld, want := grads(false)
	held, got := grads(true)
	assert.GreaterOrEqual(t, plainHeld, int64(n*n*2), "without checkpointing the region holds the copy (and the product saves it)")
	assert.Less(t, held, int64(n*n*2), "the checkpointed region's copy is freed as it returns")
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "gradient element %d", i)
	}
}

// TestSelectiveHandsBackSaved: under a policy the recomputation gets the
// saved outputs (the same storage) instead of computing them, and
// recomputes the rest.
func TestSelectiveHandsBackSaved(t *testing.T) {
	n := newNet(4)
	defer n.release()
	c := tensor.NewCtx()
	var lin, ln []*tensor.Tensor
	f := func(in ...*autograd.Var) *autograd.Var {
		h := autograd.LayerNorm(in[0], n.lnW, n.lnB, 1e-5)
		ln = append(ln, h.Value)
		l := autograd.Linear(h, n.w1, n.b1)
		lin = append(lin, l.Value)
		return autograd.GeluLinear(l, n.w2, n.b2)
	}
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, width))
		y := checkpoint.Options{Policy: checkpoint.SaveOps("Linear")}.Apply(f, x)
		require.NoError(t, autograd.Sum(y, false).Backward())
	})
	for _, p := range n.params() {
		p.ZeroGrad()
	}
	require.Len(t, lin, 2)
	require.True(t, lin[0].SharesStorage(lin[1]), "the Linear's output was handed back")
	require.False(t, ln[0].SharesStorage(ln[1]), "the LayerNorm was recomputed")
	require.Zero(t, c.BytesInUse())
}

// TestNotDeterministic: a function that does something else the second
// time makes Backward fail with ErrArgument, naming the problem.
func TestNotDeterministic(t *testing.T) {
	n := newNet(5)
	defer n.release()
	for name, policy := range map[string]checkpoint.Policy{"plain": nil, "selective": checkpoint.SaveMatMuls} {
		c := tensor.NewCtx()
		calls := 0
		f := func(in ...*autograd.Var) *autograd.Var {
			calls++
			h := autograd.Linear(in[0], n.w3, nil)
			if calls == 2 {
				h = autograd.LayerNorm(h, n.lnW, n.lnB, 1e-5)
			}
			return autograd.Linear(h, n.w3, nil)
		}
		c.WithScope(func() {
			x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, width))
			y := checkpoint.Options{Policy: policy}.Apply(f, x)
			err := autograd.Sum(y, false).Backward()
			if policy == nil {
				require.NoError(t, err, name) // nothing checks the ops without a policy
			} else {
				require.ErrorIs(t, err, tensor.ErrArgument, name)
				require.ErrorContains(t, err, "not deterministic", name)
			}
		})
		for _, p := range n.params() {
			p.ZeroGrad()
		}
	}
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 2, width))
		calls := 0
		y := checkpoint.Apply(func(in ...*autograd.Var) *autograd.Var {
			calls++
			autograd.RandomOffset(c, calls)
			return autograd.Linear(in[0], n.w3, nil)
		}, x)
		err := autograd.Sum(y, false).Backward()
		require.ErrorContains(t, err, "drew 2 random numbers, the forward pass 1")
	})
	n.w3.ZeroGrad()
}

// TestGoroutines: checkpointed steps on four goroutines, each in its own
// context, match the serial run bit for bit.
func TestGoroutines(t *testing.T) {
	n := newNet(6)
	defer n.release()
	// The goroutines share the parameters, so their gradients go to copies.
	want := run(t, tensor.NewCtx(), n, true, func(x *autograd.Var) *autograd.Var { return n.block(n.block(x)) })
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i := range results {
		m := newNet(6)
		defer m.release()
		wg.Go(func() {
			c := tensor.NewCtx()
			for range 5 {
				results[i] = run(t, c, m, true, func(x *autograd.Var) *autograd.Var {
					return checkpoint.Options{Policy: checkpoint.SaveMatMuls}.Sequential(1, x, m.block, m.block)
				})
				autograd.SetRandomState(c, 0)
				assert.Zero(t, c.BytesInUse())
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		sameBits(t, want, r, "goroutine "+string(rune('0'+i)))
	}
}

// TestFailureFreesEverything fails each allocation of a checkpointed
// forward and backward pass in turn (the manager's fault injection): the
// error reaches the caller, and once the parameters' gradients are zeroed
// nothing the pass allocated is left, the gradients of the detached
// inputs the recomputation's backward keeps included.
func TestFailureFreesEverything(t *testing.T) {
	n := newNet(4)
	defer n.release()
	m := tensor.CPU().Memory()
	pass := func(c *tensor.Ctx) error {
		return tensor.Try(func() {
			c.WithScope(func() {
				x := c.RandN(tensor.CPU(), tensor.Float32, rand.New(rand.NewPCG(1, 1)), 1, 2, 5, width)
				in := autograd.Const(x).Detach()
				in.SetRequiresGrad(true)
				y := checkpoint.Apply(func(v ...*autograd.Var) *autograd.Var { return n.block(n.block(v[0])) }, in)
				if err := autograd.Sum(y, false).Backward(); err != nil {
					panic(err)
				}
				in.ZeroGrad()
			})
		})
	}
	allocs := func() (k int64) {
		for _, r := range m.Stats().Roles {
			k += r.Allocs
		}
		return k
	}
	a0 := allocs()
	require.NoError(t, pass(tensor.NewCtx()))
	points := allocs() - a0
	for _, p := range n.params() {
		p.ZeroGrad()
	}
	for k := int64(1); k <= points; k++ {
		c := tensor.NewCtx()
		m.FailAllocation(k)
		err := pass(c)
		require.Equal(t, int64(1), m.FailAllocation(0), "allocation %d of %d was reached", k, points)
		require.ErrorIs(t, err, memory.ErrInjected, "allocation %d", k)
		for _, p := range n.params() {
			p.ZeroGrad()
		}
		// The context's own count: the manager's total also moves when the
		// garbage collector frees what earlier tests leaked.
		require.Zero(t, c.BytesInUse(), "allocation %d of %d", k, points)
	}
}

// SaveMatMulsUpTo keeps a product's outputs only up to its byte limit,
// and never a non-product's.
func TestSaveMatMulsUpTo(t *testing.T) {
	small := tensor.Zeros(tensor.CPU(), tensor.Float32, 10)
	large := tensor.Zeros(tensor.CPU(), tensor.Float32, 11)
	defer small.Release()
	defer large.Release()
	p := checkpoint.SaveMatMulsUpTo(40)
	assert.Equal(t, checkpoint.MustSave, p("Linear", []*tensor.Tensor{small}))
	assert.Equal(t, checkpoint.PreferRecompute, p("Linear", []*tensor.Tensor{large}))
	assert.Equal(t, checkpoint.PreferRecompute, p("MatMul", []*tensor.Tensor{small, small}), "outputs count together")
	assert.Equal(t, checkpoint.PreferRecompute, p("LayerNorm", []*tensor.Tensor{small}))
	assert.Equal(t, checkpoint.MustSave, checkpoint.SaveMatMuls("GeluLinear", []*tensor.Tensor{large}))
}

// TestNilInput: a nil input (an optional argument the function handles,
// as PyTorch's checkpoint passes None through) reaches the function as
// nil in the forward pass and in the recomputation, gets no gradient, and
// the others get the plain run's, bit for bit.
func TestNilInput(t *testing.T) {
	n := newNet(10)
	defer n.release()
	f := func(x, mask *autograd.Var) *autograd.Var {
		if mask != nil {
			x = autograd.Mul(x, mask)
		}
		return n.block(x)
	}
	c := tensor.NewCtx()
	autograd.SetRandomState(c, 100)
	want := run(t, c, n, true, func(x *autograd.Var) *autograd.Var { return f(x, nil) })
	for _, o := range []checkpoint.Options{{}, {Policy: checkpoint.SaveMatMuls}, {Offload: &checkpoint.Offload{Keep: -1}}} {
		c := tensor.NewCtx()
		autograd.SetRandomState(c, 100)
		var nils []bool
		got := run(t, c, n, true, func(x *autograd.Var) *autograd.Var {
			return o.Apply(func(in ...*autograd.Var) *autograd.Var {
				nils = append(nils, in[1] == nil)
				return f(in[0], in[1])
			}, x, nil)
		})
		sameBits(t, want, got, "a nil input")
		require.Equal(t, []bool{true, true}, nils, "nil in the forward pass and in the recomputation")
		require.Zero(t, c.BytesInUse())
	}
}
