package memory

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpandableWholePagesAtBoundary: at the end of an expandable range,
// a request of 16 whole pages or more that may live long (not an
// activation, gradient or staging buffer) starts at the free run's first
// page boundary, for the same new pages, while the pool has a planner
// that has made no plan yet; short-lived roles, smaller requests, pools
// without a planner and pools with a plan keep the run's start.
func TestExpandableWholePagesAtBoundary(t *testing.T) {
	cases := []struct {
		name     string
		role     Role
		pages    int64
		plan     bool // PlanSteps
		planned  bool // a plan made before the request
		boundary bool
	}{
		{"workspace", RoleWorkspace, 16, true, false, true},
		{"unknown role", RoleOther, 24, true, false, true},
		{"parameter", RoleParameter, 16, true, false, true},
		{"activation", RoleActivation, 16, true, false, false},
		{"gradient", RoleGradient, 16, true, false, false},
		{"staging", RoleStaging, 16, true, false, false},
		{"15 pages", RoleWorkspace, 15, true, false, false},
		{"no planner", RoleWorkspace, 16, false, false, false},
		{"after a plan", RoleWorkspace, 16, true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPool(NewHostBackend(TierDevice), PoolConfig{Expandable: true, PlanSteps: c.plan})
			defer func() { require.NoError(t, p.Close()) }()
			p.mu.Lock()
			defer p.mu.Unlock()
			page := p.page
			a, err := p.alloc(page*3/2, 0, 0, RoleActivation, "") // the run starts inside its second page
			require.NoError(t, err)
			if c.planned {
				require.NotNil(t, p.planner)
				p.planner.plans = 1
			}
			before := p.sinks.own.Reserved.Current
			w, err := p.alloc(c.pages*page, 0, 0, c.role, "")
			require.NoError(t, err)
			newBytes := p.sinks.own.Reserved.Current - before
			start := a.Addr() + uintptr(a.Size())
			want := start
			if c.boundary {
				want = a.Addr() + uintptr(2*page)
			}
			require.Equal(t, fmt.Sprintf("%#x", want), fmt.Sprintf("%#x", w.Addr()), "where the %d pages start", c.pages)
			require.Equal(t, c.pages*page, newBytes, "the same new pages either way")
			checkExpandable(t, p)
			require.NoError(t, p.free(w))
			require.NoError(t, p.free(a))
		})
	}
}

// TestExpandableBoundaryKeepsEqualEarlierRun: the page boundary of the
// end of the range is taken over that run's start only; an earlier run
// of the same length that needs as few new pages keeps the request, as
// it did before the boundary (the first run found among equals). The
// boundary took it from such a run when the used range passed half the
// reservation (here a small one).
func TestExpandableBoundaryKeepsEqualEarlierRun(t *testing.T) {
	const mib = 1 << 20
	vm := NewHostBackend(TierDevice).(VirtualMemory)
	p := NewPool(smallSpaceVM{VirtualMemory: vm, space: 68 * mib}, PoolConfig{Expandable: true, PlanSteps: true})
	defer func() { require.NoError(t, p.Close()) }()
	require.Equal(t, int64(2*mib), p.page)
	a, err := p.Alloc(33*mib, 0)
	require.NoError(t, err)
	b, err := p.Alloc(2*mib, 0) // at 33 MiB: the end's run starts inside a page, at 35 MiB
	require.NoError(t, err)
	require.NoError(t, p.Free(a))
	require.NoError(t, p.EmptyCache()) // the run [0, 33 MiB): 16 pages of holes, as [35, 68 MiB) needs
	p.mu.Lock()
	defer p.mu.Unlock()
	base := b.seg.region.Addr
	require.Equal(t, uintptr(33*mib), b.Addr()-base)
	w, err := p.alloc(32*mib, 0, 0, RoleWorkspace, "")
	require.NoError(t, err)
	require.Equal(t, "+0 MiB", fmt.Sprintf("+%d MiB", (w.Addr()-base)/mib), "the earlier run of the same length and cost")
	checkExpandable(t, p)
	require.NoError(t, p.free(w))
	require.NoError(t, p.free(b))
}
