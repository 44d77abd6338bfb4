package memory_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestHoldCannotOverflowTheLimit: without a limit, Hold took any count,
// so that holds near MaxInt64 overflowed the bytes held: a limit set
// later then let every allocation through (held + request wrapped
// negative). A hold past any memory is refused, and the bytes held keep
// the limit.
func TestHoldCannotOverflowTheLimit(t *testing.T) {
	pol := memory.HybridPolicy()
	pol.Spill = false
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Policy: pol})
	defer func() { require.NoError(t, m.Close()) }()
	_, err := m.Hold(memory.TierDevice, math.MaxInt64)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "Hold of")
	release, err := m.Hold(memory.TierDevice, 1<<61)
	require.NoError(t, err, "no limit: any sane count is held")
	_, err = m.Hold(memory.TierDevice, 1<<61)
	require.ErrorIs(t, err, memory.ErrInvalidArgument, "together past any memory")
	require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
	_, err = m.Alloc(MiB, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "the bytes held leave no room under the limit")
	release()
	a := mustManagerAlloc(t, m, MiB, memory.RoleActivation)
	require.NoError(t, a.Free())
}

// TestHostExpandableRefusesMoreThanTheMachine: the host's virtual memory
// creates pages without end (pages of a sparse memory file cost nothing
// until touched), so an expandable host pool "allocated" 32 TiB on a
// machine of 24 GiB, after minutes of mapping pages, where a classic one
// is refused at once by mmap: touching it would have had the kernel kill
// the process. A single request past the memory the process may use is
// refused as out of memory, with or without a budget, and keeps nothing.
func TestHostExpandableRefusesMoreThanTheMachine(t *testing.T) {
	_, total, ok := memory.NewHostBackend(memory.TierHost).Info()
	if !ok {
		t.Skip("the host's memory cannot be read here")
	}
	pol := memory.SingleTierPolicy(memory.TierHost)
	cfg := memory.Config{Segments: memory.SegmentsExpandable, Policy: pol}
	for _, m := range []*memory.Manager{
		memory.NewHostManager(cfg),
		memory.NewBudgetHostManager(cfg, memory.NewHostBudget(1<<62, "test")),
	} {
		require.True(t, m.Pool(memory.TierHost).Expandable())
		a := mustManagerAlloc(t, m, 3*MiB, memory.RoleActivation)
		before := m.Stats().Tiers[memory.TierHost]
		start := time.Now()
		_, err := m.Alloc(2*total, memory.RoleActivation)
		var oom *memory.OOMError
		require.ErrorAs(t, err, &oom, "twice the machine's %s", memory.FormatBytes(total))
		assert.Contains(t, err.Error(), "more than the")
		assert.Less(t, time.Since(start), 10*time.Second)
		after := m.Stats().Tiers[memory.TierHost]
		assert.Equal(t, before.Reserved.Current, after.Reserved.Current, "the failed allocation keeps nothing")
		assert.Equal(t, before.Allocated.Current, after.Allocated.Current)
		assert.Equal(t, before.OOMs+1, after.OOMs)
		b := mustManagerAlloc(t, m, 5*MiB, memory.RoleActivation)
		require.NoError(t, b.Free())
		require.NoError(t, a.Free())
		require.NoError(t, m.Close())
	}
	// Past a Limit too, the Limit refuses it, as before: the budget at
	// work, which the placement scheduler tells from a full device.
	cfg.Limits[memory.TierHost] = GiB
	m := memory.NewHostManager(cfg)
	_, err := m.Alloc(2*total, memory.RoleActivation)
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Nil(t, oom.Cause)
	require.NoError(t, m.Close())
}

// TestParseSizesExactly: byte counts went through a float64, so that
// "9007199254740993" gave 9007199254740992 and 2^62+1 gave 2^62; a count
// past the largest size, or with a unit no one reads, was refused with
// only the list of accepted forms, naming neither the size nor the unit.
func TestParseSizesExactly(t *testing.T) {
	for in, want := range map[string]int64{
		"9007199254740993": 9007199254740993, "4611686018427387904": 1 << 62, "4294967297KiB": 4294967297 << 10,
		"1e3": 1000, "+4GiB": 4 << 30, " 4 GiB ": 4 << 30, "0.5GB": 5e8,
	} {
		got, err := memory.ParseHostMemory(in, 1<<30)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
		got, err = memory.ParseBudget(in, 1<<30)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, want := range map[string]string{
		"4611686018427387905": "more than", "99999999999TiB": "more than", "1e400": "more than",
		"99999999999PiB": `"PiB"`, "4 gigs": `"gigs"`, "-1": "want a size", "0.1B": "want a size",
	} {
		_, err := memory.ParseHostMemory(in, 1<<30)
		require.ErrorContains(t, err, want, in)
		_, err = memory.ParseBudget(in, 1<<30)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, in)
		require.ErrorContains(t, err, want, in)
		require.ErrorContains(t, err, "want a size such as 4GiB", in)
	}
	// A whole share is the whole, exactly: through a float64, 100% of
	// MaxInt64 wrapped negative and was refused as "less than a byte".
	for _, whole := range []int64{math.MaxInt64, 1<<53 + 1, 1000} {
		got, err := memory.ParseHostMemory("100%", whole)
		require.NoError(t, err, whole)
		assert.Equal(t, whole, got)
		got, err = memory.ParseBudget("50%", whole)
		require.NoError(t, err, whole)
		assert.InDelta(t, whole/2, got, float64(whole)/1e15)
	}
}

// TestNoHostBudget: nil is the *HostBudget of no budget (DefaultHostBudget
// returns it for "off", NewBudgetHostManager takes it), yet its methods
// and a NewBudgetBackend over it dereferenced it and panicked.
func TestNoHostBudget(t *testing.T) {
	var b *memory.HostBudget
	require.NotPanics(t, func() {
		assert.Zero(t, b.Limit())
		cur, peak := b.Used()
		assert.Zero(t, cur)
		assert.Zero(t, peak)
		assert.Equal(t, "no host memory budget", b.String())
	})
	up := memory.NewHostBackend(memory.TierHost)
	be := memory.NewBudgetBackend(up, nil)
	assert.Equal(t, up, be, "no budget: the backend itself")
	p := memory.NewPool(be, memory.PoolConfig{})
	blk, err := p.Alloc(100, 0)
	require.NoError(t, err)
	require.NoError(t, p.Free(blk))
	require.NoError(t, p.Close())
}

// TestManagerCloseReportsDirectPoolLeaks: blocks allocated from a
// manager's pools directly (Manager.Pool) and still live were released by
// Close without a word, where Pool.Close reports them, and their bytes
// were counted among the allocations' in the leak report.
func TestManagerCloseReportsDirectPoolLeaks(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	_, err := m.Pool(memory.TierHost).Alloc(1000, 0)
	require.NoError(t, err)
	err = m.Close()
	require.ErrorIs(t, err, memory.ErrLeaked)
	assert.Contains(t, err.Error(), "1 live blocks allocated from its pools directly (1000 B requested)")

	m = memory.NewHostManager(memory.Config{})
	_, err = m.Pool(memory.TierDevice).Alloc(MiB, 0)
	require.NoError(t, err)
	mustManagerAlloc(t, m, 2*KiB, memory.RoleStaging)
	a := mustManagerAlloc(t, m, 3*MiB, memory.RoleGradient)
	require.NoError(t, a.Free())
	err = m.Close()
	require.ErrorIs(t, err, memory.ErrLeaked)
	assert.Contains(t, err.Error(), "1 live allocations (2.00 KiB requested)", "the allocations' bytes only")
	assert.Contains(t, err.Error(), "1 live blocks allocated from its pools directly (1.00 MiB requested)")
}

// TestHistoryJSONRoundTrips: a History went out as JSON with each event's
// kind by name (EventKind.MarshalText), but no EventKind read a name
// back, so a history saved as JSON could not be loaded again, where
// Snapshot's JSON (tiers and roles by name) round-trips.
func TestHistoryJSONRoundTrips(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	m.RecordHistory(0)
	a := mustManagerAlloc(t, m, 3000, memory.RoleGradient)
	m.MarkHistory("step 1")
	require.NoError(t, a.Free())
	require.NoError(t, m.EmptyCache())
	require.NoError(t, m.Close())
	h := m.History()
	js, err := json.Marshal(h)
	require.NoError(t, err)
	var back memory.History
	require.NoError(t, json.Unmarshal(js, &back))
	require.Equal(t, h.Events, back.Events)
	kinds := map[memory.EventKind]bool{}
	for _, e := range back.Events {
		kinds[e.Kind] = true
	}
	assert.Len(t, kinds, 5, "every kind, by name")
	var k memory.EventKind
	require.ErrorIs(t, k.UnmarshalText([]byte("allocate")), memory.ErrInvalidArgument)
}
