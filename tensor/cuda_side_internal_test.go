package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// balancedGrid takes the rows in as few rounds as width blocks would, each
// block running the same number of rows or one fewer.
func TestBalancedGrid(t *testing.T) {
	for _, c := range []struct{ n, width, want int }{
		{0, 33, 1}, {1, 33, 1}, {33, 33, 33}, {34, 33, 17}, {66, 33, 33}, {67, 33, 23}, {200, 33, 29}, {200, 1, 1},
	} {
		got := balancedGrid(c.n, c.width)
		assert.Equal(t, c.want, got, "%d rows, width %d", c.n, c.width)
		if c.n > 0 {
			rounds := ceilDiv(c.n, got)
			assert.Equal(t, ceilDiv(c.n, min(c.n, c.width)), rounds, "%d rows, width %d: the rounds of width blocks", c.n, c.width)
			last := c.n - got*(rounds-1) // the blocks busy in the last round
			assert.Greater(t, last, got-rounds, "%d rows, width %d: %d of %d blocks busy in the last round", c.n, c.width, last, got)
		}
	}
}

// TestGPUOverlappedAfterMoveTo: moments moved by MoveTo right before an
// overlapped update carry the copy stream's fence, which the update's raw
// table addresses do not join; the side stream must wait for it (as the
// pipelined update's sideAfterFences does), or the update reads the new
// block before the copy has filled it and the copy then overwrites what
// the update wrote.
func TestGPUOverlappedAfterMoveTo(t *testing.T) {
	dev := gpuForTest(t)
	WithScope(func() {
		n := 32 << 20 // 128 MiB a moment: the copies take milliseconds
		rng := rand.New(rand.NewPCG(9, 10))
		p := RandN(dev, Float32, rng, 1, n)
		m, v := RandN(dev, Float32, rng, 0.1, n), Full(dev, Float32, 0.5, n)
		rp, rm, rv := p.Clone(), m.Clone(), v.Clone()
		for step := 1; step <= 2; step++ {
			g := RandN(dev, Float32, rng, 1, n)
			AdamWSteps([]*Tensor{rp}, []*Tensor{g.Clone()}, []*Tensor{rm}, []*Tensor{rv}, []float64{0.1}, 1e-2, 0.9, 0.95, 1e-8, step)
			tier := memory.TierStaging
			if step == 2 {
				tier = memory.TierDevice
			}
			require.NoError(t, MoveTo(tier, m, v))
			AdamWStepsOverlapped([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, []float64{0.1}, 1e-2, 0.9, 0.95, 1e-8, step, 1<<30)
			require.NoError(t, WaitOverlapped(dev))
			require.Equal(t, rp.Float32s(), p.Float32s(), "step %d: parameter", step)
			require.Equal(t, rm.Float32s(), m.Float32s(), "step %d: first moment", step)
			require.Equal(t, rv.Float32s(), v.Float32s(), "step %d: second moment", step)
		}
	})
}
