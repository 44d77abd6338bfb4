package memory

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayoutPlanNoOverlap lays out random items around random obstacles
// and checks that no two items live at the same time share a byte, that
// no item meets an obstacle still there when it is born, and that every
// item found a place below the limit; and the same of layoutWith's compact mode.
func TestLayoutPlanNoOverlap(t *testing.T) {
	const page = 2 << 20
	var feet [2]int64
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var items []planItem
		for range 10 + rng.IntN(200) {
			from := int64(rng.IntN(300))
			to := from + 1 + int64(rng.IntN(100))
			if rng.IntN(10) == 0 {
				to = planForever
			}
			size := int64(1+rng.IntN(1<<rng.IntN(24))) * MinBlockSize
			items = append(items, planItem{size: size, from: from, to: to})
		}
		var fixed []planFixed
		var at int64
		for range rng.IntN(20) {
			at += int64(rng.IntN(8<<20)) / MinBlockSize * MinBlockSize
			f := planFixed{off: at, size: int64(1+rng.IntN(4096)) * MinBlockSize, to: int64(rng.IntN(200))}
			if rng.IntN(3) == 0 {
				f.to = planForever
			}
			fixed = append(fixed, f)
			at += f.size
		}
		for _, compact := range []bool{false, true} {
			offs := layoutWith(items, fixed, 1<<40, page, planByPressure, compact)
			feet[b2i(compact)] += planFoot(items, offs, fixed, page)
			for i, a := range items {
				require.GreaterOrEqual(t, offs[i], int64(0), "seed %d: item %d placed", seed, i)
				for j := i + 1; j < len(items); j++ {
					b := items[j]
					if a.from < b.to && b.from < a.to {
						require.False(t, offs[i] < offs[j]+b.size && offs[j] < offs[i]+a.size,
							"seed %d (compact %v): items %d %+v at %d and %d %+v at %d overlap", seed, compact, i, a, offs[i], j, b, offs[j])
					}
				}
				for _, f := range fixed {
					if a.from < f.to {
						require.False(t, offs[i] < f.off+f.size && f.off < offs[i]+a.size,
							"seed %d (compact %v): item %d %+v at %d meets obstacle %+v", seed, compact, i, a, offs[i], f)
					}
				}
			}
		}
	}
	// layoutWith's compact mode keeps the footprint lower (the pages a settled plan
	// holds).
	t.Logf("footprints over the seeds: %d pages, compact %d", feet[0], feet[1])
	require.Less(t, feet[1], feet[0])
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLayoutPlanReuse checks that space is reused once its item is dead,
// and that an item that fits nowhere below the limit gets -1.
func TestLayoutPlanReuse(t *testing.T) {
	const page = 2 << 20
	items := []planItem{
		{size: 4 * page, from: 0, to: 10},
		{size: 4 * page, from: 10, to: 20}, // may take the first one's place
		{size: 2 * page, from: 5, to: 15},
	}
	offs := layoutPlan(items, nil, 6*page, page)
	require.Equal(t, []int64{0, 0, 4 * page}, offs)
	offs = layoutPlan(items, []planFixed{{off: 0, size: page, to: planForever}}, 6*page, page)
	require.Equal(t, int64(-1), offs[2], "no room for the third item beside the obstacle")
}
