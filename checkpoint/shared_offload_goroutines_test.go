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
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// TestSharedOffloadOnGoroutines: goroutines, each in its own context
// with leaves of its own over two shared kept weights, run chains of
// checkpointed regions (a selective policy, one Offload shared by all, as
// a shared model's regions share one) at the same time, some under
// bfloat16 autocast, some steps a forward pass only (evaluation with
// recording on, whose records the Offload forgets). Every loss and
// gradient equals, bit for bit, the same work done alone, and nothing is
// left behind (run with -race).
func TestSharedOffloadOnGoroutines(t *testing.T) {
	cpu := tensor.CPU()
	base := memtest.Settled(cpu.Memory())
	rng := rand.New(rand.NewPCG(3, 4))
	c0 := tensor.NewCtx()
	w1, w2 := c0.RandN(cpu, tensor.Float32, rng, 0.3, 16, 32), c0.RandN(cpu, tensor.Float32, rng, 0.3, 32, 16)
	tensor.Keep(w1, w2)
	off := &checkpoint.Offload{Keep: 1}
	opts := checkpoint.Options{Policy: checkpoint.SaveMatMuls, Offload: off}
	run := func(i int) (out []uint32) {
		c := tensor.NewCtx()
		p1, p2 := autograd.Param(w1, "w1"), autograd.Param(w2, "w2")
		block := func(in ...*autograd.Var) *autograd.Var {
			return autograd.Add(in[0], autograd.MatMul(autograd.Gelu(autograd.MatMul(in[0], p1)), p2))
		}
		rng := rand.New(rand.NewPCG(uint64(i), 9))
		for step := range 60 {
			err := tensor.Try(func() {
				c.WithScope(func() {
					c.WithRole(memory.RoleActivation, func() {
						var loss *autograd.Var
						forward := func() {
							h := autograd.Const(c.RandN(cpu, tensor.Float32, rng, 1, 8, 16))
							for range 3 {
								h = opts.Apply(block, h)
							}
							loss = autograd.Mean(autograd.Mul(h, h), false)
						}
						if i%2 == 1 {
							amp.Autocast(c, tensor.BFloat16, forward)
						} else {
							forward()
						}
						out = append(out, math.Float32bits(loss.Value.Float32s()[0]))
						if step%3 == 2 {
							return // a forward pass only
						}
						if err := loss.Backward(); err != nil {
							panic(err)
						}
						for _, g := range []*tensor.Tensor{p1.Grad, p2.Grad} {
							for _, v := range g.Float32s() {
								out = append(out, math.Float32bits(v))
							}
						}
						p1.ZeroGrad()
						p2.ZeroGrad()
					})
				})
			})
			if !assert.NoError(t, err, "goroutine %d, step %d", i, step) {
				return nil
			}
		}
		assert.Zero(t, c.BytesInUse(), "goroutine %d: context bytes at the end", i)
		return out
	}
	const n = 4
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
		assert.Equal(t, want[i], got[i], "goroutine %d: concurrent against alone", i)
	}
	w1.Release()
	w2.Release()
	assert.Equal(t, base, memtest.Settled(cpu.Memory()))
}
