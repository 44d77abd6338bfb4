package autograd_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestFailedBackwardReleasesParameterOnlyValues: a Backward that fails
// before reaching a chain of ops on parameters alone (tanh of a parameter,
// tanh of that; only the second met the caller's data) leaves their nodes
// unstepped. The first tanh's value is an orphan that no scope owns: it
// was never released (the garbage collector's safety net took it, and
// the CPU's bytes stayed in use until then).
func TestFailedBackwardReleasesParameterOnlyValues(t *testing.T) {
	cpu := tensor.CPU()
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	defer func() { p.ZeroGrad(); p.Value.Release() }()
	inUse := cpu.Memory().InUse()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1.5}))
		h := autograd.Tanh(autograd.Tanh(p)) // the inner one stays an orphan
		loss := autograd.Sum(failingOp(autograd.Mul(autograd.Sum(h, false), x)), false)
		require.ErrorIs(t, loss.Backward(), tensor.ErrArgument)
	})
	require.Zero(t, c.BytesInUse())
	require.Equal(t, inUse, cpu.Memory().InUse())
}

// TestUndifferentiatedGraphReleasesParameterOnlyValues: a graph over a
// chain of ops on parameters alone, never differentiated (an evaluation
// with recording on), is released with the scope that owns it, as Record
// promises: the chain's values below the one that met the caller's data
// were orphans owned by no scope, held by the graph alone.
func TestUndifferentiatedGraphReleasesParameterOnlyValues(t *testing.T) {
	cpu := tensor.CPU()
	p := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "p")
	q := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.5, -1, 0.25, 2}, 2, 2), "q")
	defer func() { p.Value.Release(); q.Value.Release() }()
	inUse := cpu.Memory().InUse()
	c := tensor.NewCtx()
	c.WithScope(func() {
		x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
		w := autograd.MatMul(autograd.Tanh(autograd.MatMul(p, q)), p)
		y := autograd.Sum(autograd.MatMul(x, w), false)
		require.Equal(t, 1, y.Value.Numel())
	})
	require.Zero(t, c.BytesInUse())
	require.Equal(t, inUse, cpu.Memory().InUse())
}

// TestLifetimeScenarios: random mixes of kept parameters (some with
// bfloat16 gradients, some hooked, the hook failing now and then) and the
// caller's data, chains on parameters alone that meet the data, Drop,
// autocast in bfloat16, Backward or Grad, RetainGraph passes before the
// last one and failing backward functions: every pass, failed or not,
// leaves no byte in use once its scope closes and the gradients go.
func TestLifetimeScenarios(t *testing.T) {
	cpu := tensor.CPU()
	rng := rand.New(rand.NewSource(3))
	data := func() []float32 {
		d := make([]float32, 9)
		for i := range d {
			d[i] = rng.Float32() - 0.5
		}
		return d
	}
	ps := []*autograd.Var{
		autograd.Param(tensor.FromFloat32s(cpu, data(), 3, 3), "p0"),
		autograd.Param(tensor.FromFloat32s(cpu, data(), 3, 3), "p1"),
		autograd.Param(tensor.FromFloat32s(cpu, data(), 3, 3), "p2"),
	}
	defer func() {
		for _, p := range ps {
			p.SetGradHook(nil)
			p.ZeroGrad()
			p.Value.Release()
		}
	}()
	require.NoError(t, ps[1].SetGradDType(tensor.BFloat16))
	inUse := cpu.Memory().InUse()
	for i := 0; i < 300; i++ {
		ac, retain, grad := rng.Intn(2) == 1, rng.Intn(3), rng.Intn(2) == 1
		fail, hook, drop := rng.Intn(4), rng.Intn(3), rng.Intn(2) == 1
		depth := rng.Intn(4)
		name := fmt.Sprintf("autocast %v retain %d grad %v fail %d hook %d drop %v depth %d", ac, retain, grad, fail, hook, drop, depth)
		switch hook {
		case 0:
			ps[2].SetGradHook(nil)
		case 1:
			ps[2].SetGradHook(func(*autograd.Var) {})
		case 2:
			ps[2].SetGradHook(func(*autograd.Var) {
				panic(&tensor.OpError{Op: "hook", Msg: "injected", Err: tensor.ErrArgument})
			})
		}
		c := tensor.NewCtx()
		err := tensor.Try(func() {
			c.WithScope(func() {
				body := func() {
					x := autograd.Const(c.FromFloat32s(cpu, data(), 3, 3))
					w := ps[rng.Intn(3)]
					for range depth { // a chain on parameters alone
						w = autograd.Tanh(autograd.MatMul(w, ps[rng.Intn(3)]))
					}
					h := autograd.MatMul(x, w)
					if fail == 1 {
						h = failingOp(h)
					}
					if drop { // Add's backward reads neither operand
						m := autograd.MatMul(h, ps[0])
						h = autograd.Reshape(autograd.Reshape(autograd.Add(m, h), 9), 3, 3)
						m.Drop()
					}
					h = autograd.Tanh(autograd.Add(h, autograd.MatMul(x, ps[2])))
					loss := autograd.Sum(h, false)
					for range retain {
						if e := loss.BackwardOpts(autograd.BackwardOptions{RetainGraph: true}); e != nil {
							panic(e)
						}
					}
					if fail == 2 {
						panic(&tensor.OpError{Op: "caller", Msg: "injected", Err: tensor.ErrArgument})
					}
					var e error
					if grad {
						_, e = autograd.Grad(loss, ps, autograd.GradOptions{AllowUnused: true})
					} else {
						e = loss.Backward()
					}
					if e != nil {
						panic(e)
					}
				}
				if ac {
					amp.Autocast(c, tensor.BFloat16, body)
				} else {
					body()
				}
			})
		})
		if fail != 1 && fail != 2 && (hook != 2 || grad && retain == 0) {
			require.NoError(t, err, name)
		}
		for _, p := range ps {
			p.ZeroGrad()
		}
		require.Zero(t, c.BytesInUse(), name)
		require.Equal(t, inUse, cpu.Memory().InUse(), "%s: bytes left in use", name)
	}
}
