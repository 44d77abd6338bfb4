package memory_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

func TestHybridPolicy(t *testing.T) {
	p := memory.HybridPolicy()
	require.NoError(t, p.Validate())
	embedding := memory.AdvisePreferDevice | memory.AdviseAccessedByDevice | memory.AdvisePrefetchToDevice
	want := [memory.NumRoles]memory.Placement{
		memory.RoleOther:          {Tier: memory.TierDevice},
		memory.RoleParameter:      {Tier: memory.TierDevice},
		memory.RoleFrozenWeight:   {Tier: memory.TierManaged, Advice: embedding | memory.AdviseReadMostly},
		memory.RoleEmbedding:      {Tier: memory.TierManaged, Advice: embedding},
		memory.RoleGradient:       {Tier: memory.TierDevice},
		memory.RoleOptimizerState: {Tier: memory.TierDevice},
		memory.RoleActivation:     {Tier: memory.TierDevice},
		memory.RoleStaging:        {Tier: memory.TierStaging},
		memory.RoleWorkspace:      {Tier: memory.TierDevice},
	}
	assert.Equal(t, want, p.Placements)
	for r := range memory.NumRoles {
		assert.Equal(t, want[r], p.Place(r))
	}
	assert.Equal(t, want[memory.RoleOther], p.Place(memory.Role(200)), "unknown roles are placed like RoleOther")
	assert.Equal(t, "other=device parameter=device "+
		"frozen=managed(read-mostly|prefer-device|accessed-by-device|prefetch-to-device) "+
		"embedding=managed(prefer-device|accessed-by-device|prefetch-to-device) gradient=device optimizer=device "+
		"activation=device staging=staging workspace=device spill", p.String())
}

func TestSingleTierPolicy(t *testing.T) {
	for tier := range memory.NumTiers {
		p := memory.SingleTierPolicy(tier)
		require.NoError(t, p.Validate())
		for r := range memory.NumRoles {
			assert.Equal(t, memory.Placement{Tier: tier}, p.Place(r))
		}
	}
	assert.NotEqual(t, memory.Policy{}, memory.SingleTierPolicy(memory.TierHost))
}

func TestPolicyValidate(t *testing.T) {
	p := memory.HybridPolicy()
	p.Placements[memory.RoleGradient].Tier = memory.NumTiers
	err := p.Validate()
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "role gradient on unknown Tier(5)")

	p = memory.HybridPolicy()
	p.Placements[memory.RoleEmbedding].Advice |= memory.AdvisePreferHost
	err = p.Validate()
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "role embedding")
	assert.Contains(t, err.Error(), "prefers both device and host")

	p = memory.HybridPolicy()
	p.Placements[memory.RoleEmbedding].Advice = 0x80
	require.ErrorIs(t, p.Validate(), memory.ErrInvalidArgument)
}

func TestAdviceString(t *testing.T) {
	assert.Equal(t, "none", memory.Advice(0).String())
	assert.Equal(t, "read-mostly|prefetch-to-device", (memory.AdviseReadMostly | memory.AdvisePrefetchToDevice).String())
	assert.Equal(t, "prefer-host|accessed-by-host", (memory.AdvisePreferHost | memory.AdviseAccessedByHost).String())
	assert.Equal(t, "accessed-by-device|0xc0", (memory.AdviseAccessedByDevice | 0xc0).String())
	assert.Equal(t, "managed", memory.Placement{Tier: memory.TierManaged}.String())
}

func TestRoleAndTierNames(t *testing.T) {
	for r := range memory.NumRoles {
		got, err := memory.ParseRole(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := memory.ParseRole("weights")
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Equal(t, "Tier(9)", memory.Tier(9).String())
}

// TestSetPolicyZeroMeansHybrid: the zero Policy means HybridPolicy in
// SetPolicy as it does in Config.
func TestSetPolicyZeroMeansHybrid(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	require.Equal(t, memory.HybridPolicy(), m.Policy())
	m.SetPolicy(memory.SingleTierPolicy(memory.TierHost))
	m.SetPolicy(memory.Policy{})
	require.Equal(t, memory.HybridPolicy(), m.Policy())
	a := mustManagerAlloc(t, m, 100, memory.RoleEmbedding)
	require.Equal(t, memory.TierManaged, a.Tier())
	require.NoError(t, a.Free())
	require.NoError(t, m.Close())
}
