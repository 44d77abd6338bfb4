package nn_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// concurrentSteps is the number of steps each goroutine of
// TestConcurrentContexts runs (STRATA_CONCURRENT_STEPS overrides; the
// acceptance run uses 1000 under -race).
func concurrentSteps(t *testing.T) int {
	if s := os.Getenv("STRATA_CONCURRENT_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err)
		return n
	}
	if testing.Short() {
		return 20
	}
	return 200
}

var microGPT = nn.GPTConfig{Vocab: 16, Context: 8, Layers: 1, Heads: 2, Width: 16, Dropout: 0.1}

func newMicroGPT(t *testing.T, seed uint64) *nn.GPT {
	g, err := nn.NewGPT(microGPT, nn.Options{Device: tensor.CPU(), DType: tensor.Float32, Rng: rand.New(rand.NewPCG(seed, 1))})
	require.NoError(t, err)
	return g
}

// trainIn trains g for n steps in its own context on a fixed random batch
// and returns the losses; it checks that the context's bytes in use after
// every step equal those after the first.
func trainIn(t *testing.T, g *nn.GPT, n int) []float64 {
	c := tensor.NewCtx()
	ps := g.Parameters()
	opt := nn.NewAdamW(ps, 3e-3, 0.1)
	defer opt.Release()
	rng := rand.New(rand.NewPCG(7, 7))
	B, T := 2, microGPT.Context
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	for i := range xs {
		xs[i], ys[i] = int32(rng.IntN(microGPT.Vocab)), int32(rng.IntN(microGPT.Vocab))
	}
	losses := make([]float64, 0, n)
	var first int64
	for i := range n {
		err := tensor.Try(func() {
			c.WithScope(func() {
				loss := g.Loss(c.FromInt32s(tensor.CPU(), xs, B, T), c.FromInt32s(tensor.CPU(), ys, B, T))
				if err := loss.Backward(); err != nil {
					panic(err)
				}
				losses = append(losses, loss.Item())
				if _, err := nn.ClipGradNorm(ps, 1); err != nil {
					panic(err)
				}
				if err := opt.Step(); err != nil {
					panic(err)
				}
				nn.ZeroGrad(ps)
			})
		})
		if !assert.NoError(t, err, "training step %d", i) {
			return losses
		}
		if i == 0 {
			first = c.BytesInUse()
		} else if !assert.Equal(t, first, c.BytesInUse(), "context bytes after step %d", i+1) {
			return losses
		}
	}
	return losses
}

// inferIn runs g's forward n times without gradients in its own context
// and checks every result against want, bit for bit.
func inferIn(t *testing.T, g *nn.GPT, ids []int32, want []float32, n int) {
	c := tensor.NewCtx()
	for i := range n {
		var got []float32
		err := tensor.Try(func() {
			c.WithScope(func() {
				autograd.NoGradIn(c, func() {
					got = g.Forward(c.FromInt32s(tensor.CPU(), ids, 1, len(ids))).Value.Float32s()
				})
			})
		})
		if !assert.NoError(t, err, "inference %d", i) || !assert.Equal(t, want, got, "inference %d", i) {
			return
		}
	}
	assert.Zero(t, c.BytesInUse(), "inference context bytes after its work")
}

// TestConcurrentContexts is issue 8's acceptance test: two goroutines
// train separate models and two run inference on a third model they
// share read-only, each in its own tensor.Ctx, at the same time. The two
// trainings start from the same weights and data, so their losses must
// agree bit for bit (interference between goroutines would break that);
// inference must repeat its serial result exactly; and the bytes in use
// return to the baseline. Run it under -race.
func TestConcurrentContexts(t *testing.T) {
	n := concurrentSteps(t)
	mem := tensor.CPU().Memory()
	base := settledInUse()
	a, b, shared := newMicroGPT(t, 1), newMicroGPT(t, 1), newMicroGPT(t, 2)
	shared.SetTraining(false)
	ids := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	var want []float32
	autograd.NoGrad(func() {
		tensor.WithScope(func() { want = shared.Forward(tensor.FromInt32s(tensor.CPU(), ids, 1, len(ids))).Value.Float32s() })
	})

	var wg sync.WaitGroup
	var la, lb []float64
	wg.Go(func() { la = trainIn(t, a, n) })
	wg.Go(func() { lb = trainIn(t, b, n) })
	wg.Go(func() { inferIn(t, shared, ids, want, n) })
	wg.Go(func() { inferIn(t, shared, ids, want, n) })
	wg.Wait()

	require.Len(t, la, n)
	require.Equal(t, la, lb, "two identical trainings on two goroutines")
	assert.Less(t, la[n-1], la[0], "the loss falls")
	for _, g := range []*nn.GPT{a, b, shared} {
		nn.Release(g.Parameters())
	}
	assert.Equal(t, base, mem.InUse(), "bytes in use back at the baseline")
	assert.Zero(t, tensor.LeakedTensors())
}

// TestMixedContextsRejected: one op over tensors of two contexts panics
// with ErrArgument naming both.
func TestMixedContextsRejected(t *testing.T) {
	c1, c2 := tensor.NewCtx(), tensor.NewCtx()
	c1.WithScope(func() {
		c2.WithScope(func() {
			x := c1.Ones(tensor.CPU(), tensor.Float32, 3)
			y := c2.Ones(tensor.CPU(), tensor.Float32, 3)
			err := tensor.Try(func() { tensor.Add(x, y) })
			require.ErrorIs(t, err, tensor.ErrArgument)
			require.ErrorContains(t, err, "two contexts")
		})
	})
	assert.Zero(t, c1.BytesInUse())
	assert.Zero(t, c2.BytesInUse())
}
