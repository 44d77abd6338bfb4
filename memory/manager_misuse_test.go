package memory_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestManagerUseAfterClose: every method of a closed manager, its pools,
// scheduler and allocations fails with ErrClosed or does nothing; none
// panics.
func TestManagerUseAfterClose(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m := memory.NewHostManager(memory.Config{Segments: mode})
		a, err := m.Alloc(4096, memory.RoleParameter)
		require.NoError(t, err)
		s, err := m.NewScheduler(memory.SchedulerConfig{})
		require.NoError(t, err)
		require.ErrorIs(t, m.Close(), memory.ErrLeaked)
		require.NotPanics(t, func() {
			_, err = m.Alloc(1, memory.RoleParameter)
			require.ErrorIs(t, err, memory.ErrClosed)
			require.ErrorIs(t, m.Free(a), memory.ErrClosed)
			require.ErrorIs(t, a.Free(), memory.ErrClosed)
			require.ErrorIs(t, m.EmptyCache(), memory.ErrClosed)
			require.ErrorIs(t, m.EmptyStreamCache(0), memory.ErrClosed)
			require.ErrorIs(t, m.SetLimit(memory.TierDevice, 1<<20), memory.ErrClosed)
			_, err = m.Hold(memory.TierDevice, 1)
			require.ErrorIs(t, err, memory.ErrClosed)
			require.ErrorIs(t, m.Migrate(a, memory.TierHost), memory.ErrClosed)
			require.ErrorIs(t, m.MigrateOn(a, memory.TierHost, 1), memory.ErrClosed)
			require.ErrorIs(t, m.RecordStream(a, 1), memory.ErrClosed)
			require.ErrorIs(t, m.Prefetch(a, 0), memory.ErrClosed)
			_, err = m.NewScheduler(memory.SchedulerConfig{})
			require.ErrorIs(t, err, memory.ErrClosed)
			_, err = s.Step()
			require.ErrorIs(t, err, memory.ErrClosed)
			require.ErrorIs(t, s.Track(a), memory.ErrClosed)
			s.Close()
			_ = m.Stats()
			_ = m.Summary()
			_ = m.Snapshot()
			m.RecordHistory(16)
			m.MarkHistory("x")
			_ = m.History()
			m.StopHistory()
			_ = m.InUse()
			m.ResetPeaks()
			_ = m.Limit(memory.TierDevice)
			m.FailAllocation(0)
			_ = a.Addr()
			_ = a.Host()
			_ = a.Stream()
			_ = a.Label()
			a.SetLabel("y")
			require.ErrorIs(t, m.Close(), memory.ErrClosed)
			p := m.Pool(memory.TierDevice)
			_, err = p.Alloc(1, 0)
			require.ErrorIs(t, err, memory.ErrClosed)
			require.ErrorIs(t, p.EmptyCache(), memory.ErrClosed)
			require.ErrorIs(t, p.Close(), memory.ErrClosed)
			_ = p.Segments()
			_ = p.Stats()
			_ = p.History()
			p.RecordHistory(4)
			p.ResetPeaks()
		})
	}
}

// TestPoolUseAfterClose: a closed pool's methods and its leaked blocks.
func TestPoolUseAfterClose(t *testing.T) {
	for _, exp := range []bool{false, true} {
		p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Expandable: exp})
		b, err := p.Alloc(100, 0)
		require.NoError(t, err)
		require.ErrorIs(t, p.Close(), memory.ErrLeaked)
		require.NotPanics(t, func() {
			require.ErrorIs(t, p.Free(b), memory.ErrClosed)
			require.ErrorIs(t, p.RecordStream(b, 1), memory.ErrClosed)
			require.Nil(t, b.Host())
			require.Zero(t, b.Addr())
			_ = b.Stream()
			p.RecordHistory(4)
			_, err = p.Alloc(1, 0)
			require.ErrorIs(t, err, memory.ErrClosed)
			_ = p.History()
			_ = p.Segments()
		})
	}
}

// TestManagerMisuse: bad sizes, roles, tiers and configurations, zero
// values of Allocation and Block, allocations of another manager and
// blocks of another pool, double frees: errors, never a panic. A zero
// Allocation's Stream used to panic (nil manager).
func TestManagerMisuse(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	m2 := memory.NewHostManager(memory.Config{})
	defer m2.Close()
	require.NotPanics(t, func() {
		for _, n := range []int64{0, -1, math.MinInt64, math.MaxInt64, 1 << 62, 1<<62 - 1} {
			_, err := m.Alloc(n, memory.RoleParameter)
			require.Error(t, err, "%d", n)
			_, err = m.Pool(memory.TierHost).Alloc(n, 0)
			require.Error(t, err, "%d", n)
		}
		_, err := m.Alloc(1, memory.NumRoles)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		_, err = m.Alloc(1, memory.Role(255))
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		require.ErrorIs(t, m.Free(nil), memory.ErrInvalidArgument)
		var za memory.Allocation
		require.Error(t, za.Free())
		_ = za.Addr()
		_ = za.Host()
		_ = za.Stream()
		_ = za.Label()
		za.SetLabel("x")
		_ = za.Touches()
		require.Error(t, m.Free(&za))
		require.Error(t, m.Migrate(&za, memory.TierHost))
		require.Error(t, m.RecordStream(&za, 0))
		var zb memory.Block
		require.Error(t, m.Pool(memory.TierHost).Free(&zb))
		require.Error(t, m.Pool(memory.TierHost).RecordStream(&zb, 0))
		a, err := m.Alloc(10, memory.RoleParameter)
		require.NoError(t, err)
		require.ErrorIs(t, m2.Free(a), memory.ErrDoubleFree)
		require.ErrorIs(t, m.RecordStream(a, 7), memory.ErrInvalidArgument) // no StreamSync
		require.NoError(t, a.Free())
		require.ErrorIs(t, a.Free(), memory.ErrDoubleFree)
		require.ErrorIs(t, m.Migrate(a, memory.TierHost), memory.ErrDoubleFree)
		require.Error(t, m.Migrate(a, memory.NumTiers))
		require.Error(t, m.SetLimit(memory.NumTiers, 1))
		require.Error(t, m.SetLimit(memory.TierDevice, -1))
		_, err = m.Hold(memory.TierDevice, -1)
		require.Error(t, err)
		_, err = m.Hold(memory.NumTiers, 1)
		require.Error(t, err)
		require.Nil(t, m.Pool(memory.NumTiers))
		require.Zero(t, m.Limit(memory.NumTiers))
		_, err = m.NewScheduler(memory.SchedulerConfig{Roles: []memory.Role{memory.NumRoles}})
		require.Error(t, err)
		_, err = m.NewScheduler(memory.SchedulerConfig{Budget: -1, Patience: -1, Margin: -1})
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		// Free a block from another pool.
		p1 := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{})
		p2 := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{})
		b, err := p1.Alloc(100, 0)
		require.NoError(t, err)
		require.ErrorIs(t, p2.Free(b), memory.ErrDoubleFree)
		require.NoError(t, p1.Free(b))
		require.ErrorIs(t, p1.Free(b), memory.ErrDoubleFree)
		require.NoError(t, p1.Close())
		require.NoError(t, p2.Close())
		m.SetPolicy(memory.Policy{Placements: [memory.NumRoles]memory.Placement{{Tier: memory.NumTiers + 3}}})
		_, err = m.Alloc(10, memory.RoleOther)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
	})
}

// pageVM is a VirtualMemory whose page size is g.
type pageVM struct {
	memory.VirtualMemory
	g int64
}

func (v pageVM) Granularity() int64 { return v.g }

// TestNewManagerRefusesBadPageSize: an expandable manager over a custom
// VirtualMemory whose page is not a positive power of two multiple of
// MinBlockSize is refused with an error naming the backend and the size,
// not a panic.
func TestNewManagerRefusesBadPageSize(t *testing.T) {
	vm, ok := memory.NewHostBackend(memory.TierHost).(memory.VirtualMemory)
	if !ok {
		t.Skip("no host virtual memory on this platform")
	}
	for _, g := range []int64{0, -memory.HostPageSize, 3 << 20, memory.MinBlockSize / 2} {
		var m *memory.Manager
		var err error
		require.NotPanics(t, func() {
			m, err = memory.NewManager([]memory.Backend{pageVM{vm, g}}, memory.Config{Segments: memory.SegmentsExpandable})
		}, "page of %d bytes", g)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, "page of %d bytes", g)
		require.Nil(t, m)
		require.ErrorContains(t, err, "NewManager: backend host has a page of "+strconv.FormatInt(g, 10)+" bytes")
	}
	m, err := memory.NewManager([]memory.Backend{pageVM{vm, memory.HostPageSize}}, memory.Config{Segments: memory.SegmentsExpandable})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}
