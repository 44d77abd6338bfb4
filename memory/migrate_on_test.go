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
	assert.Equal(t, own, a.Stream(), "the new block is the allocation's stream's")
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

	// Back again on the same copy stream: the new block's one cross use is
	// that stream, which is allowed.
	require.NoError(t, m.MigrateOn(a, memory.TierDevice, copier))
	assert.Equal(t, memory.TierDevice, a.Tier())
	assert.Equal(t, want, a.Host())
	require.NoError(t, m.MigrateOn(a, memory.TierDevice, copier), "to its own tier: nothing to do")

	// A third stream is refused: the block is in use on the copy stream.
	require.ErrorIs(t, m.MigrateOn(a, memory.TierStaging, 3), memory.ErrInvalidArgument)
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
