package memory

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLowerBound checks the branch-free search of the planner's live
// index against slices.BinarySearch on sorted slices of every length up to
// 70, with and without repeats, for targets below, between, at and above
// their elements.
func TestLowerBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for n := range 70 {
		for _, spread := range []uint64{3, 1 << 20} {
			x := make([]uintptr, n)
			for i := range x {
				x[i] = uintptr(rng.Uint64N(spread) * 512)
			}
			slices.Sort(x)
			for a := uintptr(0); a <= uintptr(spread*512)+512; a += max(1, uintptr(spread*512)/97) {
				want, _ := slices.BinarySearch(x, a)
				require.Equal(t, want, lowerBound(x, a), "n %d, a %d", n, a)
			}
			for _, a := range x {
				want, _ := slices.BinarySearch(x, a)
				require.Equal(t, want, lowerBound(x, a), "n %d, a %d (an element)", n, a)
			}
		}
	}
}

// TestPlanStepsFindAcrossTrims: find keeps finding a period through the
// trims of the history, which drop the windows recorded before the last
// one whole (stepPlanner.older), at every clock: right after a trim the
// window's earlier end was recorded before it.
func TestPlanStepsFindAcrossTrims(t *testing.T) {
	const period = 3001
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := make([]int64, period)
	for i := range sizes {
		sizes[i] = int64(1+rng.IntN(1<<12)) << 9
	}
	sp := &stepPlanner{seen: map[uint64][]int64{}}
	trims := 0
	for sp.clock < 5*planHistory {
		sp.sizes = append(sp.sizes, sizes[sp.clock%period])
		sp.streams = append(sp.streams, 0)
		sp.freed = append(sp.freed, -1)
		sp.clock++
		sp.roll()
		if len(sp.sizes) >= 2*planHistory {
			sp.trim()
			trims++
		}
		from := sp.find()
		if sp.clock >= period+planWindow {
			require.Equal(t, sp.clock-period, from, "the period at clock %d", sp.clock)
		}
	}
	require.Equal(t, 4, trims)
	require.NotEmpty(t, sp.older)
}
