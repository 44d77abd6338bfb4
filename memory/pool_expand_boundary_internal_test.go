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
