package autograd_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestKeptProductBesideBackgroundAutocast: one goroutine works in
// Background under bfloat16 autocast (a one-goroutine program's
// amp.Autocast(nil, ...)), while another, in a context of its own and
// outside any autocast region, multiplies two parameters (a product over
// kept tensors alone, a LoRA update's A@B). The second goroutine never
// entered autocast, so its product must be the float32 one, every time:
// autocast state lives in each goroutine's context, and an op over kept
// tensors alone must not pick up another goroutine's region (nor touch
// its weight cache, which -race flagged).
func TestKeptProductBesideBackgroundAutocast(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	cpu := tensor.CPU()
	a := autograd.Param(tensor.RandN(cpu, tensor.Float32, rng, 1, 8, 16), "a")
	b := autograd.Param(tensor.RandN(cpu, tensor.Float32, rng, 1, 16, 8), "b")
	w := autograd.Param(tensor.RandN(cpu, tensor.Float32, rng, 1, 16, 8), "w")
	defer func() {
		for _, p := range []*autograd.Var{a, b, w} {
			p.Value.Release()
		}
	}()
	c := tensor.NewCtx()
	var want []float32
	c.WithScope(func() {
		autograd.NoGradIn(c, func() { want = c.Adopt(autograd.MatMul(a, b).Value).Float32s() })
	})

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { // the Background program, under autocast
		x := tensor.RandN(cpu, tensor.Float32, rand.New(rand.NewPCG(6, 6)), 1, 4, 16)
		defer x.Release()
		for !stop.Load() {
			err := tensor.Try(func() {
				tensor.WithScope(func() {
					amp.Autocast(nil, tensor.BFloat16, func() {
						autograd.NoGrad(func() { _ = autograd.MatMul(autograd.Const(x), w).Value.Float32s() })
					})
				})
			})
			if !assert.NoError(t, err) {
				return
			}
		}
	})
	for i := range 2000 {
		var got []float32
		err := tensor.Try(func() {
			c.WithScope(func() {
				autograd.NoGradIn(c, func() { got = c.Adopt(autograd.MatMul(a, b).Value).Float32s() })
			})
		})
		require.NoError(t, err)
		if !assert.Equal(t, want, got, "product %d of two parameters, outside autocast", i) {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	require.Zero(t, c.BytesInUse())
}

// TestParamOfKeptWeightFromGoroutines: two goroutines, each in its own
// Ctx, wrap one kept weight with Param and differentiate their own graphs.
// Param calls tensor.Keep, which wrote the kept tensor's fields again on
// every call while the other goroutine's ops read them (go test -race
// reported it before session 40; a reviewer helper found it): Keep now
// writes only a tensor not yet kept.
func TestParamOfKeptWeightFromGoroutines(t *testing.T) {
	w, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, 4, 4)
	require.NoError(t, err)
	defer w.Release()
	w.Fill(0.5)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tensor.NewCtx()
			for range 50 {
				c.WithScope(func() {
					p := autograd.Param(w, "w")
					x := autograd.Const(c.Ones(tensor.CPU(), tensor.Float32, 3, 4))
					l := autograd.Sum(autograd.Linear(x, p, nil), false)
					gs, err := autograd.Grad(l, []*autograd.Var{p}, autograd.GradOptions{})
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, []float32{3, 3, 3, 3}, gs[0].Float32s()[:4], "each row of the gradient: the 3 rows of ones")
					gs[0].Release()
				})
			}
		}()
	}
	wg.Wait()
}
