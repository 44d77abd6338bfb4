package memory_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestFailedAllocationKeepsReserved: an allocation refused for lack of
// memory (the pool's Limit, or a host budget) leaves the bytes reserved
// where they were before the call, on a pool and on a manager, with
// expandable and classic segments. Expandable growth used to create pages
// one at a time up to the limit for the doomed request and keep them as
// free memory, so the whole budget stayed reserved and other tiers' pools,
// drawing on the same host budget, could not grow.
func TestFailedAllocationKeepsReserved(t *testing.T) {
	for _, expandable := range []bool{true, false} {
		name := map[bool]string{true: "expandable", false: "classic"}[expandable]
		t.Run("pool-limit-"+name, func(t *testing.T) {
			p := memory.NewPool(memory.NewHostBackend(memory.TierDevice), memory.PoolConfig{Expandable: expandable, Limit: 64 * MiB})
			a := mustAlloc(t, p, 10*MiB, 0)
			before := p.Stats().Reserved.Current
			_, err := p.Alloc(100*MiB, 0)
			require.ErrorIs(t, err, memory.ErrOutOfMemory)
			require.Contains(t, err.Error(), "limit 64.00 MiB")
			require.Contains(t, err.Error(), "the limit on reserved bytes would be exceeded")
			require.Equal(t, before, p.Stats().Reserved.Current, "the failed allocation keeps nothing")
			b := mustAlloc(t, p, 50*MiB, 0) // what fits still fits
			require.NoError(t, p.Free(b))
			require.NoError(t, p.Free(a))
			require.NoError(t, p.Close())
		})
		t.Run("pool-budget-"+name, func(t *testing.T) {
			bud := memory.NewHostBudget(100*MiB, "test")
			p := memory.NewPool(memory.NewBudgetBackend(memory.NewHostBackend(memory.TierDevice), bud), memory.PoolConfig{Expandable: expandable})
			a := mustAlloc(t, p, 10*MiB, 0)
			before := p.Stats().Reserved.Current
			usedBefore, _ := bud.Used()
			_, err := p.Alloc(200*MiB, 0)
			require.ErrorIs(t, err, memory.ErrOutOfMemory)
			require.Contains(t, err.Error(), "would pass the host memory budget of 100.00 MiB (test)")
			require.Equal(t, before, p.Stats().Reserved.Current, "the failed allocation keeps nothing")
			used, _ := bud.Used()
			require.Equal(t, usedBefore, used, "the budget is charged nothing")
			require.NoError(t, p.Free(a))
			require.NoError(t, p.Close())
		})
		segs := map[bool]memory.SegmentMode{true: memory.SegmentsExpandable, false: memory.SegmentsClassic}[expandable]
		t.Run("manager-limit-"+name, func(t *testing.T) {
			pol := memory.HybridPolicy()
			pol.Spill = false
			m := memory.NewHostManager(memory.Config{Segments: segs, Policy: pol})
			require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
			before := m.Stats().Total.Reserved.Current
			_, err := m.Alloc(100*MiB, memory.RoleActivation)
			require.ErrorIs(t, err, memory.ErrOutOfMemory)
			require.Contains(t, err.Error(), "limit 64.00 MiB")
			st := m.Stats()
			require.Equal(t, before, st.Total.Reserved.Current, "the failed allocation keeps nothing")
			require.Zero(t, st.Tiers[memory.TierDevice].Reserved.Current)
			require.NoError(t, m.Close())
		})
		t.Run("manager-budget-"+name, func(t *testing.T) {
			// The reviewer's repro: STRATA_HOST_MEMORY=100MiB, 200 MiB on
			// the CPU device, then memory of another tier.
			bud := memory.NewHostBudget(100*MiB, "STRATA_HOST_MEMORY=100MiB")
			m := memory.NewBudgetHostManager(memory.Config{Segments: segs}, bud)
			m.OnSpill(func(memory.SpillEvent) {})
			before := m.Stats().Total.Reserved.Current
			_, err := m.Alloc(200*MiB, memory.RoleActivation)
			require.ErrorIs(t, err, memory.ErrOutOfMemory)
			require.Contains(t, err.Error(), "would pass the host memory budget of 100.00 MiB (STRATA_HOST_MEMORY=100MiB)")
			require.Equal(t, before, m.Stats().Total.Reserved.Current, "the failed allocation keeps nothing")
			used, _ := bud.Used()
			require.Zero(t, used)
			for _, r := range []memory.Role{memory.RoleEmbedding, memory.RoleStaging, memory.RoleActivation} {
				a, err := m.Alloc(60*MiB, r)
				require.NoError(t, err, "%s: the budget is all there", r)
				require.NoError(t, a.Free())
				require.NoError(t, m.EmptyCache())
			}
			require.NoError(t, m.Close())
		})
	}
}

// TestHostOOMMessageNamesBudget: the CPU device's out-of-memory message
// names the host budget that refused the allocation, and its size, where
// it said "limit none", and calls the memory host memory, not a device.
func TestHostOOMMessageNamesBudget(t *testing.T) {
	bud := memory.NewHostBudget(100*MiB, "STRATA_HOST_MEMORY=100MiB")
	m := memory.NewBudgetHostManager(memory.Config{}, bud)
	pol := memory.HybridPolicy()
	pol.Spill = false
	m.SetPolicy(pol)
	a := mustManagerAlloc(t, m, 30*MiB, memory.RoleActivation)
	_, err := m.Alloc(200*MiB, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "memory: out of host memory for the device tier (host(device)): tried to allocate 200.00 MiB; "+
		"host memory budget of 100.00 MiB (STRATA_HOST_MEMORY=100MiB); 30.00 MiB allocated; "), msg)
	require.Contains(t, msg, "; budget free 70.00 MiB of 100.00 MiB: ", msg)
	require.NotContains(t, msg, "limit none")
	require.NotContains(t, msg, "device free")
	require.NotContains(t, msg, "out of memory on device")

	// A pool limit and the budget: both are named.
	require.NoError(t, m.SetLimit(memory.TierDevice, 64*MiB))
	_, err = m.Alloc(40*MiB, memory.RoleActivation)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.Contains(t, err.Error(), "; limit 64.00 MiB; host memory budget of 100.00 MiB (STRATA_HOST_MEMORY=100MiB); ")
	require.NoError(t, a.Free())
	require.NoError(t, m.Close())

	// Plain host memory, no budget: not a device either.
	p := memory.NewPool(memory.NewHostBackend(memory.TierHost), memory.PoolConfig{Limit: 4 * MiB})
	_, err = p.Alloc(8*MiB, 0)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	require.True(t, strings.HasPrefix(err.Error(), "memory: out of host memory (host): tried to allocate 8.00 MiB; limit 4.00 MiB; "), err.Error())
	require.NotContains(t, err.Error(), "device free")
	require.NoError(t, p.Close())
}

// TestParseBudgetHintOnce: a malformed budget's error gives the accepted
// forms once.
func TestParseBudgetHintOnce(t *testing.T) {
	for _, s := range []string{"4 gigs", "abc", "150%", ""} {
		_, err := memory.ParseBudget(s, 80*GiB)
		require.ErrorIs(t, err, memory.ErrInvalidArgument, s)
		require.Equal(t, 1, strings.Count(err.Error(), "want"), "%q: %v", s, err)
		require.Contains(t, err.Error(), fmt.Sprintf("budget %q", s))
	}
}

// TestHostMemoryBelowOnePage: a host budget smaller than one page of the
// host backend (2 MiB) would fail every allocation: DefaultHostBudget
// refuses it, naming the variable, the value and the smallest size.
func TestHostMemoryBelowOnePage(t *testing.T) {
	for _, v := range []string{"1KiB", "1", "2097151", "1MiB"} {
		t.Setenv(memory.EnvHostMemory, v)
		b, err := memory.DefaultHostBudget()
		require.Error(t, err, v)
		require.ErrorContains(t, err, fmt.Sprintf("%s=%q", memory.EnvHostMemory, v))
		require.ErrorContains(t, err, "2.00 MiB")
		if b != nil {
			require.GreaterOrEqual(t, b.Limit(), 2*MiB, "the default budget instead")
		}
	}
	t.Setenv(memory.EnvHostMemory, "2MiB")
	b, err := memory.DefaultHostBudget()
	require.NoError(t, err)
	require.Equal(t, 2*MiB, b.Limit())
}
