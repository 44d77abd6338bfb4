package autograd_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Gradients through Narrow pieces of a computed var are assembled in
// place (autograd/narrow.go). Every way pieces can cover the var — a full
// split, a gap, overlapping pieces, pieces along a middle axis, the var
// also used whole, a narrowed leaf — gives the gradient finite
// differences give, and nothing leaks.
func TestNarrowGradientsAssembleInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	x0 := randn(rng, 4, 6, 9)
	w := randn(rng, 4, 6, 9)
	tensor.Keep(x0, w)
	defer x0.Release()
	defer w.Release()
	weigh := func(p *autograd.Var, axis, start int) *autograd.Var {
		wp := w.Narrow(axis, start, p.Value.Dim(axis))
		return autograd.Sum(autograd.Mul(p, autograd.Const(wp)), false)
	}
	cases := map[string]func(y *autograd.Var) *autograd.Var{
		"split along the last axis": func(y *autograd.Var) *autograd.Var {
			ps := autograd.Split(y, 3, 2)
			return autograd.Add(autograd.Add(weigh(ps[0], 2, 0), weigh(ps[1], 2, 3)), weigh(ps[2], 2, 6))
		},
		"a piece unused (its span zero)": func(y *autograd.Var) *autograd.Var {
			ps := autograd.Split(y, 2, 1)
			return autograd.Add(weigh(ps[0], 1, 0), weigh(ps[2], 1, 4))
		},
		"overlapping pieces": func(y *autograd.Var) *autograd.Var {
			a, b := autograd.Narrow(y, 0, 0, 3), autograd.Narrow(y, 0, 1, 3)
			return autograd.Add(weigh(a, 0, 0), weigh(b, 0, 1))
		},
		"the same piece twice": func(y *autograd.Var) *autograd.Var {
			a, b := autograd.Narrow(y, -1, 2, 4), autograd.Narrow(y, -1, 2, 4)
			return autograd.Add(weigh(a, 2, 2), weigh(b, 2, 2))
		},
		"pieces and the whole": func(y *autograd.Var) *autograd.Var {
			ps := autograd.Split(y, 5, 2)
			whole := autograd.Sum(autograd.Mul(y, y), false)
			return autograd.Add(autograd.Add(weigh(ps[0], 2, 0), whole), weigh(ps[1], 2, 5))
		},
		"pieces on two axes": func(y *autograd.Var) *autograd.Var {
			a, b := autograd.Narrow(y, 2, 0, 4), autograd.Narrow(y, 0, 2, 2)
			return autograd.Add(weigh(a, 2, 0), weigh(b, 0, 2))
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			before := settledInUse()
			require.NoError(t, autograd.GradCheck(func(xs []*autograd.Var) *autograd.Var {
				y := autograd.Mul(xs[0], xs[0]) // a computed var: its gradient is assembled
				return f(y)
			}, []*tensor.Tensor{x0}, nil, 1e-6, 1e-7, 1e-6))
			// A narrowed leaf takes the plain path.
			require.NoError(t, autograd.GradCheck(func(xs []*autograd.Var) *autograd.Var { return f(xs[0]) },
				[]*tensor.Tensor{x0}, nil, 1e-6, 1e-7, 1e-6))
			// At most what was in use before (an earlier test's leftovers
			// may be freed meanwhile): nothing leaked.
			assert.LessOrEqual(t, tensor.CPU().Memory().InUse(), before, "nothing leaked")
		})
	}
}

// A Narrow's gradient is freed as soon as it is written into its input's
// pending gradient: in a chain of stages each splitting a computed var
// into pieces, the gradient-role peak of backward does not grow with the
// number of stages (it did when the pieces' gradients lived until the end
// of backward).
func TestNarrowGradientsFreedAfterDeposit(t *testing.T) {
	const B = 512
	rng := rand.New(rand.NewPCG(23, 24))
	w := randn(rng, 4, 12)
	tensor.Keep(w)
	defer w.Release()
	peak := func(stages int) int64 {
		x := autograd.Param(randn(rng, B, 12), "x")
		defer done(x)
		m := tensor.CPU().Memory()
		var p int64
		tensor.WithScope(func() {
			h := x
			for range stages {
				ps := autograd.Split(autograd.Mul(h, h), 4, 1)
				h = autograd.MatMul(autograd.Add(autograd.Add(ps[0], ps[1]), ps[2]), autograd.Const(w))
			}
			loss := autograd.Sum(h, false)
			m.ResetPeaks()
			require.NoError(t, loss.Backward())
			p = m.Stats().Roles[memory.RoleGradient].Allocated.Peak
		})
		return p
	}
	short, long := peak(2), peak(16)
	piece := int64(B * 4 * 8)
	assert.Less(t, long-short, 3*piece, "gradient peak: %d bytes for 2 stages, %d for 16", short, long)
}
