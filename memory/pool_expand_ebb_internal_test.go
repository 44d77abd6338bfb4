package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanStepsEbbOnTop: a parameter is allocated, then a step's blocks,
// half of which are freed, leaving holes between the live ones. Once the
// pool's allocated bytes are under half their peak, a large request of
// the size of a live parameter (the moments the first update creates)
// goes after the highest live block (takeTop), with the next such one
// beside it; before, each went by best fit into a hole of the step's (the
// first at 5.5 MiB), and the next steps' layouts had to work around them
// there. A large request of the size of a block that died goes by best
// fit, and so does one made while the pool holds half its peak or more.
func TestPlanStepsEbbOnTop(t *testing.T) {
	const mib = 1 << 20
	for _, ebb := range []bool{false, true} {
		p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
		alloc := func(n int64) *Block {
			b, err := p.Alloc(n, 0)
			require.NoError(t, err)
			return b
		}
		param := alloc(5 * mib / 2)
		base := param.addr
		var a [8]*Block // the step's blocks, at 2.5, 5.5, ..., 23.5 MiB
		for i := range a {
			a[i] = alloc(3 * mib)
			require.Equal(t, uintptr(5*mib/2+3*mib*i), a[i].addr-base, "the step's blocks are contiguous")
		}
		for _, i := range []int{1, 3, 5, 7} {
			require.NoError(t, p.Free(a[i]))
		}
		live := []*Block{param, a[0], a[2], a[4], a[6]}
		if !ebb {
			// 14.5 of a peak of 26.5 MiB: best fit (the hole at 5.5 MiB).
			b := alloc(5 * mib / 2)
			require.Equal(t, uintptr(11*mib/2), b.addr-base, "best fit while the pool holds half its peak")
			live = append(live, b)
		} else {
			require.NoError(t, p.Free(a[4]))
			require.NoError(t, p.Free(a[6]))
			live = live[:3]
			// 8.5 of 26.5 MiB: the pool ebbs; the highest live block,
			// a[2], ends at 11.5 MiB. The size of the step's dead blocks:
			// best fit (the hole at 5.5 MiB).
			b := alloc(3 * mib)
			require.Equal(t, uintptr(11*mib/2), b.addr-base, "the size of a block that died: best fit")
			require.NoError(t, p.Free(b))
			// The parameter's size: after the highest live block, together.
			for i := range 2 {
				b := alloc(5 * mib / 2)
				require.Equal(t, uintptr(23*mib/2+5*mib/2*i), b.addr-base, "state %d", i)
				live = append(live, b)
			}
		}
		p.mu.Lock()
		checkExpandable(t, p)
		p.mu.Unlock()
		for _, b := range live {
			require.NoError(t, p.Free(b))
		}
		require.NoError(t, p.Close())
	}
}
