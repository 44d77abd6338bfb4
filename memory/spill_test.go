package memory_test

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func TestSpillUnderHybridPolicy(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 4 * MiB}})
	defer func() { require.NoError(t, m.Close()) }()
	var events []memory.SpillEvent
	m.OnSpill(func(e memory.SpillEvent) { events = append(events, e) })

	a := mustManagerAlloc(t, m, MiB, memory.RoleActivation)
	assert.Equal(t, memory.TierDevice, a.Tier())
	b, err := m.AllocOp(4*MiB, memory.RoleActivation, 0, "matmul")
	require.NoError(t, err, "the hybrid policy spills instead of failing")
	assert.Equal(t, memory.TierOffload, b.Tier())
	assert.Equal(t, memory.RoleActivation, b.Role())
	// The spilled bytes are usable and freed to the tier they came from.
	copy(b.Host(), bytes.Repeat([]byte{7}, int(4*MiB)))
	c := mustManagerAlloc(t, m, 6*MiB, memory.RoleGradient)
	assert.Equal(t, memory.TierOffload, c.Tier())

	require.Len(t, events, 1, "the first spill is reported once")
	e := events[0]
	assert.Equal(t, memory.RoleActivation, e.Role)
	assert.Equal(t, "matmul", e.Op)
	assert.Equal(t, int64(4*MiB), e.Size)
	assert.Equal(t, memory.TierDevice, e.From)
	assert.Equal(t, memory.TierOffload, e.To)
	assert.Contains(t, e.String(), "4.00 MiB for activation (op matmul) did not fit the device tier")
	assert.Contains(t, e.String(), "limit of 4.00 MiB")

	s := m.Stats()
	assert.Equal(t, memory.Moved{Count: 2, Bytes: 10 * MiB}, s.Spills)
	assert.Equal(t, int64(4*MiB), s.Limits[memory.TierDevice])
	assert.Equal(t, int64(10*MiB), s.Tiers[memory.TierOffload].Requested.Current)
	assert.Equal(t, int64(2), s.Tiers[memory.TierDevice].OOMs, "each refusal still counts as the device tier's OOM")
	assert.Contains(t, m.Summary(), "spilled to offload: 2 allocations, 10.00 MiB")
	assert.Contains(t, m.Summary(), "4.00 MiB", "the summary shows the device limit")

	for _, x := range []*memory.Allocation{a, b, c} {
		require.NoError(t, x.Free())
	}
	s = m.Stats()
	assert.Zero(t, s.Tiers[memory.TierOffload].Requested.Current)
	assert.Zero(t, s.Total.Requested.Current)
}

func TestSpillOnlyWhereThePolicySays(t *testing.T) {
	noSpill := memory.HybridPolicy()
	noSpill.Spill = false
	for name, p := range map[string]memory.Policy{"hybrid without spill": noSpill, "device": memory.SingleTierPolicy(memory.TierDevice)} {
		t.Run(name, func(t *testing.T) {
			m := memory.NewHostManager(memory.Config{Policy: p, Limits: [memory.NumTiers]int64{memory.TierDevice: 2 * MiB}})
			_, err := m.Alloc(4*MiB, memory.RoleActivation)
			var oom *memory.OOMError
			require.ErrorAs(t, err, &oom)
			assert.Equal(t, memory.TierDevice, oom.Tier)
			assert.Zero(t, m.Stats().Spills.Count)
			require.NoError(t, m.Close())
		})
	}
	t.Run("only the device tier spills", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{Limits: [memory.NumTiers]int64{memory.TierManaged: 2 * MiB}})
		_, err := m.Alloc(4*MiB, memory.RoleEmbedding)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		require.NoError(t, m.Close())
	})
	t.Run("the offload tier refuses too", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 2 * MiB, memory.TierOffload: 2 * MiB}})
		m.OnSpill(func(memory.SpillEvent) { t.Error("no spill happened") })
		_, err := m.Alloc(4*MiB, memory.RoleActivation)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		assert.Contains(t, err.Error(), "spilling it to the offload tier failed too")
		assert.Zero(t, m.Stats().Spills.Count)
		require.NoError(t, m.Close())
	})
	t.Run("injected faults do not spill", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{})
		m.FailAllocation(1)
		_, err := m.Alloc(4*MiB, memory.RoleActivation)
		require.ErrorIs(t, err, memory.ErrInjected)
		require.NoError(t, m.Close())
	})
	t.Run("never to host memory a device cannot reach", func(t *testing.T) {
		m, err := memory.NewManager([]memory.Backend{
			memtest.NewAddressBackend(memory.TierDevice, 2*MiB),
			memory.NewHostBackend(memory.TierHost),
		}, memory.Config{})
		require.NoError(t, err)
		_, err = m.Alloc(4*MiB, memory.RoleActivation)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		require.NoError(t, m.Close())
	})
}

func TestSetLimit(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	defer func() { require.NoError(t, m.Close()) }()
	a := mustManagerAlloc(t, m, 3*MiB, memory.RoleActivation) // a 20 MiB segment
	b := mustManagerAlloc(t, m, 30*MiB, memory.RoleActivation)
	require.NoError(t, b.Free())
	assert.Equal(t, int64(50*MiB), m.Stats().Tiers[memory.TierDevice].Reserved.Current)
	require.NoError(t, m.SetLimit(memory.TierDevice, 24*MiB))
	assert.Equal(t, int64(24*MiB), m.Limit(memory.TierDevice))
	assert.Equal(t, int64(20*MiB), m.Stats().Tiers[memory.TierDevice].Reserved.Current, "lowering the limit releases the cache")
	c, err := m.Alloc(18*MiB, memory.RoleActivation)
	require.NoError(t, err)
	assert.Equal(t, memory.TierOffload, c.Tier(), "past the new limit the hybrid policy spills")
	require.NoError(t, c.Free())
	require.NoError(t, m.SetLimit(memory.TierDevice, 0))
	assert.Zero(t, m.Limit(memory.TierDevice))
	require.NoError(t, a.Free())

	require.ErrorIs(t, m.SetLimit(memory.TierDevice, -1), memory.ErrInvalidArgument)
	require.ErrorIs(t, m.SetLimit(memory.NumTiers, 1), memory.ErrInvalidArgument)
	assert.Zero(t, m.Limit(memory.NumTiers))
}

// TestBudgetCoversManaged: the device budget counts the managed tier's
// reserved bytes (unified memory lives on the device that uses it), in
// the pool's limit, its out-of-memory error and the scheduler's demand.
func TestBudgetCoversManaged(t *testing.T) {
	pol := memory.HybridPolicy()
	pol.Spill = false // the refusal itself, not its spill
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Policy: pol})
	defer func() { require.NoError(t, m.Close()) }()
	require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
	emb := mustManagerAlloc(t, m, 30*MiB, memory.RoleEmbedding)
	require.Equal(t, memory.TierManaged, emb.Tier())
	held := m.Stats().Tiers[memory.TierManaged].Reserved.Current
	require.GreaterOrEqual(t, held, int64(30*MiB))

	a := mustManagerAlloc(t, m, 20*MiB, memory.RoleActivation) // fits: 30 + 20 < 64
	_, err := m.Alloc(20*MiB, memory.RoleActivation)           // 30 + 20 + 20 > 64
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom, "without the managed tier's bytes the device tier would have room")
	assert.Equal(t, held, oom.Shared)
	assert.Contains(t, err.Error(), "limit 64.00 MiB ("+memory.FormatBytes(held)+" of it held by managed memory)")

	s, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	defer s.Close()
	plan, err := s.Step()
	require.NoError(t, err)
	assert.Equal(t, int64(64*MiB), plan.Budget)
	assert.GreaterOrEqual(t, plan.Demand, held+20*MiB, "demand counts the managed bytes")

	// Freeing the table and emptying the cache gives the room back.
	require.NoError(t, emb.Free())
	require.NoError(t, m.EmptyCache())
	b := mustManagerAlloc(t, m, 20*MiB, memory.RoleActivation)
	require.NoError(t, b.Free())
	require.NoError(t, a.Free())
}

func TestParseBudget(t *testing.T) {
	for s, want := range map[string]int64{
		"4GiB": 4 << 30, "500MB": 500e6, "1073741824": 1 << 30, "50%": 40 << 30, "0.25": 20 << 30, "off": 0, "0": 0, "2g": 2 << 30,
	} {
		got, err := memory.ParseBudget(s, 80<<30)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "abc", "-1GiB", "4XB", "150%", "NaN"} {
		_, err := memory.ParseBudget(s, 80<<30)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, "%q", s)
		assert.Contains(t, err.Error(), "want a size such as 4GiB", s)
	}
	_, err := memory.ParseBudget("0.5", 0)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
}

func TestOnAlloc(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	var seen []int64
	m.OnAlloc(func(a *memory.Allocation) { seen = append(seen, a.Size()); _ = m.Stats() }) // the lock is not held
	a := mustManagerAlloc(t, m, 100, memory.RoleActivation)
	b := mustManagerAlloc(t, m, 200, memory.RoleActivation)
	_, err := m.Alloc(-1, memory.RoleActivation)
	require.Error(t, err)
	assert.Equal(t, []int64{100, 200}, seen)
	m.OnAlloc(nil)
	c := mustManagerAlloc(t, m, 300, memory.RoleActivation)
	assert.Len(t, seen, 2)
	for _, x := range []*memory.Allocation{a, b, c} {
		require.NoError(t, x.Free())
	}
	require.NoError(t, m.Close())
}

// TestHoldPastTheLimitByFar: a hold so large that adding it to the bytes
// held overflows is refused like any hold past the limit, and the limit
// still holds for allocations.
func TestHoldPastTheLimitByFar(t *testing.T) {
	pol := memory.HybridPolicy()
	pol.Spill = false
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Policy: pol})
	defer func() { require.NoError(t, m.Close()) }()
	require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
	a := mustManagerAlloc(t, m, MiB, memory.RoleActivation)
	_, err := m.Hold(memory.TierDevice, math.MaxInt64)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	_, err = m.Alloc(100*MiB, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "past the 64 MiB limit")
	require.NoError(t, a.Free())
}

// TestHold: bytes held outside the pools count against the device limit
// (an allocation that would fit without them is refused, and the error
// says so), in the scheduler's demand, a hold past the limit is refused,
// one that fits once the pool's cache is released gets in, and release
// gives the bytes back once.
func TestHold(t *testing.T) {
	pol := memory.HybridPolicy()
	pol.Spill = false
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Policy: pol})
	defer func() { require.NoError(t, m.Close()) }()
	require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
	s, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	release, err := m.Hold(memory.TierDevice, 40*MiB)
	require.NoError(t, err)
	_, err = m.Alloc(30*MiB, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "40 held + 30 > 64")
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, int64(40*MiB), oom.Held)
	assert.Contains(t, err.Error(), "40.00 MiB of it held outside the pools")
	a := mustManagerAlloc(t, m, 20*MiB, memory.RoleActivation)
	plan, err := s.Step()
	require.NoError(t, err)
	assert.Equal(t, int64(60*MiB), plan.Demand, "the held bytes are demand")
	_, err = m.Hold(memory.TierDevice, 8*MiB)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "40 + 20 + 8 > 64")
	release()
	release() // a second call gives nothing back twice
	b := mustManagerAlloc(t, m, 30*MiB, memory.RoleActivation)
	_, err = m.Hold(memory.TierDevice, 15*MiB)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "20 + 30 + 15 > 64: the 40 were given back once")
	release2, err := m.Hold(memory.TierDevice, 8*MiB)
	require.NoError(t, err, "20 + 30 + 8 <= 64")
	release2()
	require.NoError(t, b.Free()) // its 30 MiB segment stays cached
	release3, err := m.Hold(memory.TierDevice, 40*MiB)
	require.NoError(t, err, "20 + 40 <= 64 once the cached segment is released")
	assert.Equal(t, int64(20*MiB), m.Stats().Tiers[memory.TierDevice].Reserved.Current, "the cache went")
	release3()
	require.NoError(t, a.Free())

	_, err = m.Hold(memory.TierDevice, 0)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	_, err = m.Hold(memory.NumTiers, 1)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
}
