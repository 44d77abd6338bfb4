package autograd_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

// TestParameterOnlyLossesOnGoroutines: goroutines, each in its own
// context with a parameter of its own, differentiate a loss of that
// parameter alone (a value of no context) at the same time, with
// Backward and with Grad, while another goroutine does its work in
// Background (the package-level functions). Every pass must succeed with
// the serial gradient, and the Background goroutine's ops too. Before
// the fix such a pass ran in Background: the passes opened their scopes
// on Background's one stack from every goroutine at once and failed
// ("opened by another goroutine", "scope closed out of order"), as did
// the Background goroutine's ops.
func TestParameterOnlyLossesOnGoroutines(t *testing.T) {
	const goroutines, steps = 4, 200
	cpu := tensor.CPU()
	loss := func(w *autograd.Var) *autograd.Var {
		return autograd.Sum(autograd.Mul(autograd.Tanh(w), w), false)
	}
	step := func(c *tensor.Ctx, w *autograd.Var) (back, grad []float32, err error) {
		err = tensor.Try(func() {
			c.WithScope(func() {
				l := loss(w)
				defer l.Value.Release() // an orphan: no scope owns it
				if err := l.Backward(); err != nil {
					panic(err)
				}
				back = w.Grad.Float32s()
				l2 := loss(w)
				defer l2.Value.Release()
				gs, err := autograd.Grad(l2, []*autograd.Var{w}, autograd.GradOptions{})
				if err != nil {
					panic(err)
				}
				grad = gs[0].Float32s()
				gs[0].Release()
			})
		})
		w.ZeroGrad()
		return back, grad, err
	}
	newW := func(c *tensor.Ctx) *autograd.Var {
		return autograd.Param(c.FromFloat32s(cpu, []float32{0.5, -1, 2}, 3), "w")
	}
	c0 := tensor.NewCtx()
	w0 := newW(c0)
	defer w0.Value.Release()
	wantBack, wantGrad, err := step(c0, w0)
	require.NoError(t, err)
	require.Equal(t, wantBack, wantGrad)
	stop := make(chan struct{})
	var background sync.WaitGroup
	background.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := tensor.Try(func() {
				tensor.WithScope(func() {
					a := tensor.FromFloat32s(cpu, []float32{1, 2}, 2)
					tensor.Add(a, a)
				})
			})
			if !assert.NoError(t, err, "the goroutine working in Background") {
				return
			}
		}
	})
	defer background.Wait()
	defer close(stop)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			c := tensor.NewCtx()
			w := newW(c)
			defer w.Value.Release()
			for i := range steps {
				back, grad, err := step(c, w)
				if !assert.NoError(t, err, "goroutine %d step %d", g, i) ||
					!assert.Equal(t, wantBack, back, "goroutine %d step %d", g, i) ||
					!assert.Equal(t, wantGrad, grad, "goroutine %d step %d", g, i) {
					return
				}
			}
		})
	}
	wg.Wait()
}
