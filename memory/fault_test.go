package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// FailAllocation fails exactly the n-th allocation, whether or not the
// pool's cache could serve it, with an *OOMError naming the request; the
// allocations around it succeed and the statistics count only those.
func TestFailAllocation(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	warm, err := m.Alloc(4096, memory.RoleActivation)
	require.NoError(t, err)
	require.NoError(t, warm.Free()) // cached: the next allocation needs no backend
	other := memory.NewHostManager(memory.Config{})
	defer other.Close()

	m.FailAllocation(3)
	var live []*memory.Allocation
	for i := 1; i <= 5; i++ {
		a, err := m.Alloc(4096, memory.RoleActivation)
		if i == 3 {
			require.ErrorIs(t, err, memory.ErrOutOfMemory)
			require.ErrorIs(t, err, memory.ErrInjected)
			var oom *memory.OOMError
			require.True(t, errors.As(err, &oom))
			require.Equal(t, int64(4096), oom.Requested)
			require.Equal(t, int64(2*4096), oom.Allocated, "the two live allocations")
			continue
		}
		require.NoError(t, err, "allocation %d", i)
		live = append(live, a)
		b, err := other.Alloc(4096, memory.RoleActivation)
		require.NoError(t, err, "another manager is not affected")
		require.NoError(t, b.Free())
	}
	require.Equal(t, int64(1), m.FailAllocation(0))
	st := m.Stats()
	require.Equal(t, int64(5), st.Roles[memory.RoleActivation].Allocs, "the warm-up and four of five")
	for _, a := range live {
		require.NoError(t, a.Free())
	}
	require.Zero(t, m.InUse())
	a, err := m.Alloc(4096, memory.RoleActivation)
	require.NoError(t, err, "disarmed")
	require.NoError(t, a.Free())
}

// FaultBackend.FailAt: a transient failure of the backend is survived by
// the pool (it releases its cache and retries); a lasting one is an
// *OOMError after the retry.
func TestFaultBackendFailAt(t *testing.T) {
	fb := memtest.NewFaultBackend(memory.NewHostBackend(memory.TierHost), 0)
	m, err := memory.NewManager([]memory.Backend{fb}, memory.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	big := int64(30 << 20) // each takes a segment of its own
	a, err := m.Alloc(big, memory.RoleActivation)
	require.NoError(t, err)
	require.NoError(t, a.Free()) // one cached segment, which does not fit the next size
	fb.FailAt(1, 1)
	b, err := m.Alloc(2*big, memory.RoleActivation)
	require.NoError(t, err, "the retry after releasing the cache succeeds")
	require.NoError(t, b.Free())
	fb.FailAt(2, -1)
	c, err := m.Alloc(3*big, memory.RoleActivation)
	require.NoError(t, err, "the first allocation from now still succeeds")
	_, err = m.Alloc(4*big, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.ErrorIs(t, err, memory.ErrInjected)
	fb.FailNext(0)
	require.NoError(t, c.Free())
	d, err := m.Alloc(4*big, memory.RoleActivation)
	require.NoError(t, err)
	require.NoError(t, d.Free())
	require.NoError(t, m.EmptyCache())
	n, bytes := fb.Live()
	require.Zero(t, n)
	require.Zero(t, bytes)
}
