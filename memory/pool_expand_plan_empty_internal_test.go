package memory

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanSegmentReleased: EmptyCache between steps releases a stream's
// expandable segment whose every block is free while a step plan placed
// in it runs; the next allocation the plan expects must not be placed in
// the released segment (it dereferenced the segment's nil first block).
func TestPlanSegmentReleased(t *testing.T) {
	vm := newStrictVM(NewHostBackend(TierDevice).(VirtualMemory))
	p := NewPool(vm, PoolConfig{Expandable: true, PlanSteps: true})
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int64, 300)
	for i := range sizes {
		sizes[i] = 1 + rng.Int64N(64<<10)
	}
	step := func() {
		var bs []*Block
		for _, n := range sizes {
			b, err := p.Alloc(n, 0)
			require.NoError(t, err)
			bs = append(bs, b)
		}
		for _, b := range bs {
			require.NoError(t, p.Free(b))
		}
	}
	for range 4 {
		step()
	}
	require.NotNil(t, p.planner.plan, "a plan runs")
	require.NoError(t, p.EmptyCache())
	require.Zero(t, p.nsegs, "the empty segment went back")
	step()
	require.NoError(t, p.EmptyCache())
	require.NoError(t, p.Close())
	require.NoError(t, vm.err)
	require.Empty(t, vm.places)
}
