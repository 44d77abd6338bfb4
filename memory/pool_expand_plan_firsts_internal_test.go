package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanStepsFirstsOnTop: a pool whose first allocations are a setup
// (planSetup or more before its first free, a model's parameters) puts a
// later request of one of their sizes, while no plan runs, right after
// its highest live block (the first step's gradients and moments, beside
// each other), where the best fit would take a hole between short-lived
// blocks; a size that is freed is no longer one of them. Without a setup
// (fewer allocations before the first free) the best fit serves.
func TestPlanStepsFirstsOnTop(t *testing.T) {
	const (
		mib     = 1 << 20
		p1, p2  = 3 * mib, 5 * mib / 4 // the parameters' sizes
		x, y, z = 3 * mib / 2, 6 * mib, 7 * mib
	)
	// With x and y, 16, 23, 15 and 4 allocations before the first free.
	for _, setup := range []int{planSetup - 2, planSetup + 5, planSetup - 3, 2} {
		kept := setup+2 >= planSetup
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
		live := map[*Block]bool{}
		alloc := func(size int64) *Block {
			b, err := p.Alloc(size, 0)
			require.NoError(t, err)
			live[b] = true
			return b
		}
		free := func(b *Block) {
			require.NoError(t, p.Free(b))
			delete(live, b)
		}
		for i := range setup {
			alloc([]int64{p1, p2}[i%2])
		}
		hx := alloc(x) // an activation that dies: a hole under 2 MiB (its pages stay mapped)
		hy := alloc(y) // one that lives on above it
		hole := hx.Addr()
		free(hx) // the pool's first free
		sp := p.planner
		if kept {
			require.True(t, sp.first(p1), "setup %d: a parameter's size", setup)
			require.True(t, sp.first(p2), "setup %d: a parameter's size", setup)
			require.False(t, sp.first(x), "setup %d: a size freed", setup)
		} else {
			require.Nil(t, sp.firsts, "setup %d: no setup, no sizes kept", setup)
		}
		// z ends on a page boundary: no mapped rest above it that would
		// be a better fit than the hole.
		yEnd := int64(hy.Addr()) + hy.Size()
		top := alloc((yEnd+p.page-1)/p.page*p.page - yEnd + z)
		require.False(t, sp.first(top.Size()), "setup %d: a size first allocated after the first free", setup)
		m := alloc(p2) // the first step's moment
		if kept {
			require.Equal(t, top.Addr()+uintptr(top.Size()), m.Addr(), "setup %d: the moment goes right after the highest live block", setup)
		} else {
			require.Equal(t, hole, m.Addr(), "setup %d: the moment takes the best fit, the hole", setup)
		}
		free(alloc(p1)) // an activation of a parameter's size
		require.False(t, sp.first(p1), "setup %d: a size once freed is no parameter's", setup)
		require.Equal(t, kept, sp.first(p2), "setup %d", setup)
		p.mu.Lock()
		checkExpandable(t, p)
		p.mu.Unlock()
		for b := range live {
			free(b)
		}
		require.NoError(t, p.Close())
	}
}
