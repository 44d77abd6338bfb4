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
