package checkpoint_test

import (
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// keptRegionSteps runs n steps in context c, each with a region over the
// parameter w alone (y = x * tanh(w*w), or a region nested in one when
// nested), and returns the bits of w's gradient after each step.
func keptRegionSteps(c *tensor.Ctx, w *autograd.Var, n int, nested bool) (grads [][]uint32, err error) {
	f := func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.Mul(in[0], in[0])) }
	if nested { // a region over w inside one over w: both in Background
		inner := f
		f = func(in ...*autograd.Var) *autograd.Var { return autograd.Mul(in[0], checkpoint.Apply(inner, in[0])) }
	}
	for range n {
		err = tensor.Try(func() {
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(tensor.CPU(), []float32{1, -1, 2, 0.5}, 2, 2))
				y := autograd.Mul(x, checkpoint.Apply(f, w))
				if err := autograd.Sum(y, false).Backward(); err != nil {
					panic(err)
				}
				var g []uint32
				for _, v := range w.Grad.Float32s() {
					g = append(g, math.Float32bits(v))
				}
				grads = append(grads, g)
			})
		})
		w.ZeroGrad()
		if err != nil {
			return grads, err
		}
	}
	return grads, nil
}

// TestKeptRegionsOnGoroutines: goroutines, each in its own context and
// each with its own parameter, checkpoint a region over their parameter
// alone (the region's context is then Background) at the same time. The
// package doc promises that goroutines with their own contexts
// checkpoint independently: every step must succeed and give the serial
// gradient, and nothing may be left behind. Before the fix the regions
// opened and closed their scopes on Background's one stack from every
// goroutine at once ("scope closed out of order", tensors released by
// another goroutine's scope, bytes left behind), and -race flagged their
// writes of Background's slots.
func TestKeptRegionsOnGoroutines(t *testing.T) {
	for _, nested := range []bool{false, true} {
		t.Run(map[bool]string{false: "flat", true: "nested"}[nested], func(t *testing.T) { keptRegionsOnGoroutines(t, nested) })
	}
}

func keptRegionsOnGoroutines(t *testing.T, nested bool) {
	const goroutines, steps = 4, 200
	newW := func() *autograd.Var {
		return autograd.Param(tensor.FromFloat32s(tensor.CPU(), []float32{0.1, 0.2, -0.3, 0.4}, 2, 2), "w")
	}
	w0 := newW()
	defer w0.Value.Release()
	want, err := keptRegionSteps(tensor.NewCtx(), w0, 1, nested)
	require.NoError(t, err)
	ws := make([]*autograd.Var, goroutines)
	for g := range ws {
		ws[g] = newW()
		defer ws[g].Value.Release()
	}
	before := tensor.CPU().Memory().InUse()
	var wg sync.WaitGroup
	for g, w := range ws {
		wg.Go(func() {
			c := tensor.NewCtx()
			got, err := keptRegionSteps(c, w, steps, nested)
			if assert.NoError(t, err, "goroutine %d", g) {
				for i := range got {
					if !assert.Equal(t, want[0], got[i], "goroutine %d step %d", g, i) {
						break
					}
				}
			}
			assert.Zero(t, c.BytesInUse(), "goroutine %d", g)
		})
	}
	wg.Wait()
	assert.Equal(t, before, tensor.CPU().Memory().InUse(), "bytes left behind")
}

// TestKeptRegionPolicyBesideKeptProducts: one goroutine checkpoints a
// region over parameters alone with a selective policy (its op hook is
// then Background's while the region runs), while another, in a context
// of its own, multiplies two other parameters (an op over kept tensors
// alone, which falls back to Background too). The second goroutine's
// products must not reach the first's recorder: its steps must all
// succeed with the serial gradients and its products stay right.
func TestKeptRegionPolicyBesideKeptProducts(t *testing.T) {
	const steps = 3000
	cpu := tensor.CPU()
	w := autograd.Param(tensor.FromFloat32s(cpu, []float32{0.1, 0.2, -0.3, 0.4}, 2, 2), "w")
	a := autograd.Param(tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2), "a")
	b := autograd.Param(tensor.FromFloat32s(cpu, []float32{5, 6, 7, 8}, 2, 2), "b")
	defer func() {
		for _, p := range []*autograd.Var{w, a, b} {
			p.Value.Release()
		}
	}()
	f := func(in ...*autograd.Var) *autograd.Var { return autograd.Tanh(autograd.MatMul(in[0], in[0])) }
	step := func(c *tensor.Ctx) (g []float32, err error) {
		err = tensor.Try(func() {
			c.WithScope(func() {
				x := autograd.Const(c.FromFloat32s(cpu, []float32{1, -1, 2, 0.5}, 2, 2))
				y := autograd.Mul(x, checkpoint.Options{Policy: checkpoint.SaveMatMuls}.Apply(f, w))
				if err := autograd.Sum(y, false).Backward(); err != nil {
					panic(err)
				}
				g = w.Grad.Float32s()
			})
		})
		w.ZeroGrad()
		return g, err
	}
	want, err := step(tensor.NewCtx())
	require.NoError(t, err)

	var wg sync.WaitGroup
	wg.Go(func() {
		c := tensor.NewCtx()
		for i := range steps {
			got, err := step(c)
			if !assert.NoError(t, err, "step %d", i) || !assert.Equal(t, want, got, "step %d", i) {
				return
			}
		}
	})
	wg.Go(func() {
		c := tensor.NewCtx()
		for i := range steps {
			var got []float32
			err := tensor.Try(func() {
				c.WithScope(func() { got = c.Adopt(autograd.MatMul(a, b).Value).Float32s() })
			})
			if !assert.NoError(t, err, "product %d", i) || !assert.Equal(t, []float32{19, 22, 43, 50}, got, "product %d", i) {
				return
			}
		}
	})
	wg.Wait()
}
