package amp_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// TestAutocastRegionsOnGoroutines: goroutines, each in its own context,
// differentiate a two-layer network over the same two kept weights at
// once (each through leaves of its own over the shared tensors): under
// float16 autocast with a GradScaler of its own, under bfloat16
// autocast, and in float32, several products a region so that its weight
// cache is hit. Each loss and gradient equals, bit for bit, the same work
// done alone; no autocast state leaks out of a region or into another
// goroutine's products, and the memory in use comes back (run with
// -race).
func TestAutocastRegionsOnGoroutines(t *testing.T) {
	cpu := tensor.CPU()
	base := memtest.Settled(cpu.Memory())
	rng := rand.New(rand.NewPCG(1, 2))
	c0 := tensor.NewCtx()
	w1, w2 := c0.RandN(cpu, tensor.Float32, rng, 0.05, 256, 512), c0.RandN(cpu, tensor.Float32, rng, 0.05, 512, 128)
	tensor.Keep(w1, w2)
	dtypes := []tensor.DType{tensor.Float16, tensor.BFloat16, tensor.Float32}
	run := func(i int) (out []uint32) {
		c := tensor.NewCtx()
		dt := dtypes[i%len(dtypes)]
		scaler := amp.NewGradScaler(dt == tensor.Float16)
		p1, p2 := autograd.Param(w1, "w1"), autograd.Param(w2, "w2")
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for step := range 4 {
			err := tensor.Try(func() {
				c.WithScope(func() {
					var loss *autograd.Var
					forward := func() {
						for range 2 {
							x := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 64, 256))
							h := autograd.Gelu(autograd.MatMul(x, p1))
							l := autograd.Mean(autograd.Mul(autograd.MatMul(h, p2), autograd.MatMul(h, p2)), false)
							if loss == nil {
								loss = l
							} else {
								loss = autograd.Add(loss, l)
							}
						}
					}
					if dt == tensor.Float32 {
						forward()
					} else {
						amp.Autocast(c, dt, forward)
					}
					if st := amp.Current(c); st.Enabled {
						panic("autocast state left on after the region")
					}
					out = append(out, math.Float32bits(loss.Value.Float32s()[0]))
					if err := autograd.Scale(loss, scaler.LossScale()).Backward(); err != nil {
						panic(err)
					}
					scaler.Unscale([]*tensor.Tensor{p1.Grad, p2.Grad})
					scaler.Update()
					for _, g := range []*tensor.Tensor{p1.Grad, p2.Grad} {
						for _, v := range g.Float32s() {
							out = append(out, math.Float32bits(v))
						}
					}
					p1.ZeroGrad()
					p2.ZeroGrad()
				})
			})
			if !assert.NoError(t, err, "goroutine %d (%v), step %d", i, dt, step) {
				return nil
			}
		}
		assert.Zero(t, c.BytesInUse(), "goroutine %d: context bytes at the end", i)
		return out
	}
	const n = 6
	var want, got [n][]uint32
	for i := range n {
		want[i] = run(i)
		require.NotEmpty(t, want[i])
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i] = run(i) })
	}
	wg.Wait()
	for i := range n {
		assert.Equal(t, want[i], got[i], "goroutine %d (%v): concurrent against alone", i, dtypes[i%len(dtypes)])
	}
	w1.Release()
	w2.Release()
	assert.Equal(t, base, memtest.Settled(cpu.Memory()))
}
