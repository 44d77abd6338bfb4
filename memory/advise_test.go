package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// adviceCall is one call an adviserBackend received.
type adviceCall struct {
	off, size  int64
	set, clear memory.Advice
	stream     memory.Stream
}

// adviserBackend is host memory standing in for managed memory, recording
// the advice it is given and failing it on demand.
type adviserBackend struct {
	memory.Backend
	calls []adviceCall
	fail  error
}

func (a *adviserBackend) Advise(r memory.Region, off, size int64, set, clear memory.Advice, s memory.Stream) error {
	if a.fail != nil {
		return a.fail
	}
	a.calls = append(a.calls, adviceCall{off, size, set, clear, s})
	return nil
}

// newAdviceManager returns a host manager whose managed tier takes advice.
func newAdviceManager(t *testing.T, p memory.Policy) (*memory.Manager, *adviserBackend) {
	t.Helper()
	ab := &adviserBackend{Backend: memory.NewHostBackend(memory.TierManaged)}
	m, err := memory.NewManager([]memory.Backend{memory.NewHostBackend(memory.TierHost), memory.NewHostBackend(memory.TierDevice), ab}, memory.Config{Policy: p})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m, ab
}

func TestManagerAppliesAdvice(t *testing.T) {
	m, ab := newAdviceManager(t, memory.HybridPolicy())
	embedding := memory.AdvisePreferDevice | memory.AdviseAccessedByDevice | memory.AdvisePrefetchToDevice

	e, err := m.AllocStream(10*KiB, memory.RoleEmbedding, 5)
	require.NoError(t, err)
	require.Equal(t, []adviceCall{{off: 0, size: 10 * KiB, set: embedding, stream: 5}}, ab.calls,
		"the embedding's whole block gets its placement's advice, on its stream")

	f, err := m.AllocStream(3000, memory.RoleFrozenWeight, 5)
	require.NoError(t, err)
	require.Len(t, ab.calls, 2)
	assert.Equal(t, adviceCall{off: 10 * KiB, size: 3072, set: embedding | memory.AdviseReadMostly, stream: 5}, ab.calls[1],
		"frozen weights are read-mostly too; nothing to clear, the segment only ever had the same flags")

	g := mustManagerAlloc(t, m, 3000, memory.RoleGradient)
	assert.Equal(t, memory.TierDevice, g.Tier())
	assert.Len(t, ab.calls, 2, "device memory takes no advice")

	ab.calls = nil
	require.NoError(t, m.Prefetch(f, 9))
	require.NoError(t, m.Prefetch(g, 9), "a no-op outside managed memory")
	assert.Equal(t, []adviceCall{{off: 10 * KiB, size: 3072, set: memory.AdvisePrefetchToDevice, stream: 9}}, ab.calls)

	for _, a := range []*memory.Allocation{e, f, g} {
		require.NoError(t, a.Free())
	}
	require.ErrorIs(t, m.Prefetch(f, 0), memory.ErrDoubleFree)
}

func TestManagerClearsStaleAdvice(t *testing.T) {
	p := memory.HybridPolicy()
	p.Placements[memory.RoleOther] = memory.Placement{Tier: memory.TierManaged}
	p.Placements[memory.RoleActivation] = memory.Placement{Tier: memory.TierManaged, Advice: memory.AdvisePreferHost}
	m, ab := newAdviceManager(t, p)

	// A segment that never had advice costs no call.
	o := mustManagerAlloc(t, m, 8*KiB, memory.RoleOther)
	assert.Empty(t, ab.calls)
	require.NoError(t, o.Free())

	e := mustManagerAlloc(t, m, 8*KiB, memory.RoleEmbedding)
	require.NoError(t, e.Free())
	ab.calls = nil

	// The same bytes, now for a role without advice: the embedding's flags
	// are cleared (inner pages only, which the backend handles).
	o = mustManagerAlloc(t, m, 8*KiB, memory.RoleOther)
	assert.Equal(t, []adviceCall{{size: 8 * KiB, clear: memory.AdvisePreferDevice | memory.AdviseAccessedByDevice}}, ab.calls)
	require.NoError(t, o.Free())
	ab.calls = nil

	a := mustManagerAlloc(t, m, 8*KiB, memory.RoleActivation)
	assert.Equal(t, []adviceCall{{size: 8 * KiB, set: memory.AdvisePreferHost,
		clear: memory.AdvisePreferDevice | memory.AdviseAccessedByDevice}}, ab.calls,
		"every flag the segment ever had and this placement lacks is cleared")
	require.NoError(t, a.Free())
}

// TestMigrateBackIntoManagedAdvises: an embedding moved out of managed
// memory (Migrate, or MigrateOn) and back gets its placement's advice
// again, as when it was allocated there; it came back with none, its pages
// left to the driver's default placement.
func TestMigrateBackIntoManagedAdvises(t *testing.T) {
	m, ab := newAdviceManager(t, memory.HybridPolicy())
	embedding := memory.AdvisePreferDevice | memory.AdviseAccessedByDevice | memory.AdvisePrefetchToDevice
	e := mustManagerAlloc(t, m, 64*KiB, memory.RoleEmbedding)
	require.Equal(t, embedding, e.Advice())
	for _, move := range []func(memory.Tier) error{
		func(t memory.Tier) error { return m.Migrate(e, t) },
		func(t memory.Tier) error { return m.MigrateOn(e, t, 0) },
	} {
		require.NoError(t, move(memory.TierDevice))
		assert.Zero(t, e.Advice())
		ab.calls = nil
		require.NoError(t, move(memory.TierManaged))
		assert.Equal(t, embedding, e.Advice())
		require.Len(t, ab.calls, 1)
		assert.Equal(t, embedding, ab.calls[0].set, "the block it moved into was advised")
		assert.Equal(t, int64(64*KiB), ab.calls[0].size)
	}
	require.NoError(t, e.Free())
}

func TestManagerAdviceFailure(t *testing.T) {
	m, ab := newAdviceManager(t, memory.HybridPolicy())
	boom := errors.New("advice refused")
	ab.fail = boom
	_, err := m.Alloc(5*KiB, memory.RoleEmbedding)
	require.ErrorIs(t, err, boom)
	assert.Contains(t, err.Error(), "advising 5.00 KiB")
	s := m.Stats()
	assert.Zero(t, s.Total.Allocated.Current, "a failed allocation holds nothing")
	assert.Zero(t, s.Total.Allocs)
	assert.Zero(t, s.Roles[memory.RoleEmbedding].Allocs)
	segs := m.Pool(memory.TierManaged).Segments()
	require.Len(t, segs, 1)
	assert.Len(t, segs[0].Blocks, 1, "the block went back and coalesced with the rest of its segment")

	ab.fail = nil
	e := mustManagerAlloc(t, m, 5*KiB, memory.RoleEmbedding)
	assert.Equal(t, segs[0].Addr, e.Addr())
	require.NoError(t, e.Free())
}
