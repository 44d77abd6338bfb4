package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanStepsEbbOnTop: a step's blocks are allocated and most of them
// freed, leaving holes between the live ones; requests made while the
// pool's allocated bytes are under half their peak (the state the first
// update creates, say) go together after the highest live block
// (takeTop), of any size. Before, each large one went by best fit into a
// hole of the step's (the first into the hole at 3 MiB), and the next
// steps' layouts had to work around them there. A large request made
// while the pool holds half its peak or more still takes the best fit.
func TestPlanStepsEbbOnTop(t *testing.T) {
	const mib = 1 << 20
	p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	var a [8]*Block
	for i := range a {
		b, err := p.Alloc(3*mib, 0)
		require.NoError(t, err)
		a[i] = b
	}
	base := a[0].addr
	for i := range a {
		require.Equal(t, uintptr(3*mib*i), a[i].addr-base, "the step's blocks are contiguous")
	}
	for _, i := range []int{1, 3, 5, 7} {
		require.NoError(t, p.Free(a[i]))
	}
	// 12 of a peak of 24 MiB: not ebbing, best fit (the hole at 3 MiB).
	b, err := p.Alloc(5*mib/2, 0)
	require.NoError(t, err)
	require.Equal(t, uintptr(3*mib), b.addr-base, "best fit while the pool holds half its peak")
	require.NoError(t, p.Free(b))
	require.NoError(t, p.Free(a[4]))
	require.NoError(t, p.Free(a[6]))
	// 6 of 24 MiB: the pool ebbs; the highest live block ends at 9 MiB.
	// The third request leaves 13.5 MiB allocated, more than half the
	// peak: the fourth takes the best fit again.
	var s [4]*Block
	for i := range s {
		b, err := p.Alloc(5*mib/2, 0)
		require.NoError(t, err)
		s[i] = b
		want := uintptr(9*mib + 5*mib/2*i)
		if i == 3 {
			want = 3 * mib
		}
		require.Equal(t, want, b.addr-base, "request %d", i)
	}
	p.mu.Lock()
	checkExpandable(t, p)
	p.mu.Unlock()
	for _, b := range append(s[:], a[0], a[2]) {
		require.NoError(t, p.Free(b))
	}
}
