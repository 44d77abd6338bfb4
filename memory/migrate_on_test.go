package memory_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestMigrateOn moves an allocation to the staging tier and back with the
// copies on another stream: the bytes follow, the allocation keeps its
// identity, and each old block is held until the copy's stream has passed.
func TestMigrateOn(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	const own, copier memory.Stream = 1, 2
	a, err := m.AllocStream(300*KiB, memory.RoleActivation, own)
	require.NoError(t, err)
	memtest.Fill(a.Host(), 7)
	want := bytes.Clone(a.Host())

	require.NoError(t, m.MigrateOn(a, memory.TierStaging, copier))
	assert.Equal(t, memory.TierStaging, a.Tier())
	assert.Equal(t, copier, a.Stream(), "the new block is the copy stream's, used on the allocation's own")
	assert.Equal(t, want, a.Host())
	s := m.Stats()
	assert.Equal(t, 300*KiB, s.Tiers[memory.TierDevice].Active.Current-s.Tiers[memory.TierDevice].Allocated.Current,
		"the device block waits for the copy's stream before it is reused")
	assert.Equal(t, memory.Moved{Count: 1, Bytes: 300 * KiB}, s.AsyncMoves)
	assert.Zero(t, s.Migrations.Count, "MigrateOn is counted apart from Migrate")
	assert.Equal(t, 300*KiB, s.Roles[memory.RoleActivation].Allocated.Current)
	ss.Complete(copier)
	require.NoError(t, m.EmptyCache())
	assert.Zero(t, m.Stats().Tiers[memory.TierDevice].Active.Current)

	// Back again on the same copy stream: the block is the copy stream's
	// and used on the allocation's own, which is allowed.
	require.NoError(t, m.MigrateOn(a, memory.TierDevice, copier))
	assert.Equal(t, memory.TierDevice, a.Tier())
	assert.Equal(t, want, a.Host())
	require.NoError(t, m.MigrateOn(a, memory.TierDevice, copier), "to its own tier: nothing to do")

	// Used on a third stream, it is refused: that stream's work is not
	// ordered before the copy.
	require.NoError(t, m.RecordStream(a, 3))
	require.ErrorIs(t, m.MigrateOn(a, memory.TierStaging, copier), memory.ErrInvalidArgument)
	assert.Equal(t, memory.TierDevice, a.Tier())
	require.ErrorIs(t, m.MigrateOn(a, memory.NumTiers, copier), memory.ErrInvalidArgument)

	require.NoError(t, a.Free())
	require.ErrorIs(t, m.MigrateOn(a, memory.TierStaging, copier), memory.ErrDoubleFree)
	ss.CompleteAll()
	require.NoError(t, m.Close())
	require.NoError(t, ss.Err())
	require.Zero(t, ss.Outstanding())
}

// TestMigrateOnOwnStream is Migrate without a StreamSync when the copy is
// on the allocation's own stream; another stream needs one.
func TestMigrateOnOwnStream(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a, err := m.AllocStream(64*KiB, memory.RoleActivation, 0)
	require.NoError(t, err)
	memtest.Fill(a.Host(), 3)
	want := bytes.Clone(a.Host())
	require.ErrorIs(t, m.MigrateOn(a, memory.TierStaging, 5), memory.ErrInvalidArgument, "no StreamSync for another stream")
	assert.Equal(t, memory.TierDevice, a.Tier())
	require.NoError(t, m.MigrateOn(a, memory.TierStaging, 0))
	assert.Equal(t, memory.TierStaging, a.Tier())
	assert.Equal(t, want, a.Host())
	assert.Zero(t, m.Stats().Tiers[memory.TierDevice].Allocated.Current)
	require.NoError(t, a.Free())
	require.NoError(t, m.Close())
}

// TestMigrateOnOutOfMemory leaves the allocation where it was when the
// target tier cannot take it.
func TestMigrateOnOutOfMemory(t *testing.T) {
	ss := memtest.NewStreamSync()
	var limits [memory.NumTiers]int64
	limits[memory.TierDevice] = 4 << 20
	m := memory.NewHostManager(memory.Config{StreamSync: ss, Limits: limits})
	a, err := m.AllocStream(2<<20, memory.RoleActivation, 1)
	require.NoError(t, err)
	require.NoError(t, m.MigrateOn(a, memory.TierStaging, 2))
	ss.CompleteAll()
	c, err := m.AllocStream(3<<20, memory.RoleActivation, 1)
	require.NoError(t, err)
	var oom *memory.OOMError
	require.ErrorAs(t, m.MigrateOn(a, memory.TierDevice, 2), &oom)
	assert.Equal(t, memory.TierStaging, a.Tier(), "a stays put")
	require.NoError(t, c.Free())
	require.NoError(t, a.Free())
	ss.CompleteAll()
	require.NoError(t, m.Close())
	require.NoError(t, ss.Err())
}

// TestMigrateOnOutOfMemoryHoldsNothing: a MigrateOn that fails before its
// copy is queued (no room in the target tier) leaves no record of the
// copy's stream on the allocation, which stays movable by Migrate (the
// scheduler's) and is reused at once when freed.
func TestMigrateOnOutOfMemoryHoldsNothing(t *testing.T) {
	ss := memtest.NewStreamSync()
	var limits [memory.NumTiers]int64
	limits[memory.TierStaging] = 2 << 20
	m := memory.NewHostManager(memory.Config{StreamSync: ss, Limits: limits})
	a, err := m.AllocStream(3<<20, memory.RoleActivation, 1)
	require.NoError(t, err)
	memtest.Fill(a.Host(), 5)
	var oom *memory.OOMError
	require.ErrorAs(t, m.MigrateOn(a, memory.TierStaging, 2), &oom)
	assert.Equal(t, memory.TierDevice, a.Tier(), "a stays put")
	require.NoError(t, m.Migrate(a, memory.TierOffload), "nothing was queued on stream 2: Migrate moves a")
	require.NoError(t, memtest.Check(a.Host(), 5))
	require.NoError(t, m.Migrate(a, memory.TierDevice))
	require.ErrorAs(t, m.MigrateOn(a, memory.TierStaging, 2), &oom)
	require.NoError(t, a.Free())
	s := m.Stats().Tiers[memory.TierDevice]
	assert.Zero(t, s.Active.Current, "freed at once: no event of stream 2 to wait for")
	assert.Zero(t, ss.Outstanding())
	require.NoError(t, m.Close())
	require.NoError(t, ss.Err())
}

// TestMigrateOnSteadyState: activations offloaded and brought back every
// step, among compute allocations of other sizes, stop growing the
// device's reservation after the first step: the moves' blocks come from
// the copy stream's segments and are reused there.
func TestMigrateOnSteadyState(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	const compute, copier memory.Stream = 1, 2
	var reserved []int64
	for range 5 {
		var saved []*memory.Allocation
		for i := range 6 { // forward: activations, each block's saved one moved out
			tmp, err := m.AllocStream(int64(3+i%3)<<20, memory.RoleActivation, compute)
			require.NoError(t, err)
			a, err := m.AllocStream(int64(4+i%2)<<20, memory.RoleActivation, compute)
			require.NoError(t, err)
			require.NoError(t, tmp.Free())
			require.NoError(t, m.MigrateOn(a, memory.TierStaging, copier))
			saved = append(saved, a)
		}
		ss.CompleteAll()
		for i := len(saved) - 1; i >= 0; i-- { // backward: brought back, used, freed
			require.NoError(t, m.MigrateOn(saved[i], memory.TierDevice, copier))
			g, err := m.AllocStream(int64(2+i%4)<<20, memory.RoleActivation, compute)
			require.NoError(t, err)
			require.NoError(t, saved[i].Free())
			require.NoError(t, g.Free())
		}
		ss.CompleteAll()
		reserved = append(reserved, m.Stats().Tiers[memory.TierDevice].Reserved.Current)
	}
	for i := 1; i < len(reserved); i++ {
		assert.Equal(t, reserved[0], reserved[i], "step %d reserved more than step 1: %v", i+1, reserved)
	}
	require.NoError(t, m.Close())
	require.NoError(t, ss.Err())
}
