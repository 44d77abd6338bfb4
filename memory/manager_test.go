package memory_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func mustManagerAlloc(t testing.TB, m *memory.Manager, size int64, r memory.Role) *memory.Allocation {
	t.Helper()
	a, err := m.Alloc(size, r)
	require.NoError(t, err, "Alloc(%d, %s)", size, r)
	return a
}

func TestHostManagerHybridPlacement(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	assert.Equal(t, memory.HybridPolicy(), m.Policy(), "the zero Policy means the hybrid one")
	want := map[memory.Role]memory.Tier{
		memory.RoleOther: memory.TierDevice, memory.RoleParameter: memory.TierDevice,
		memory.RoleFrozenWeight: memory.TierManaged, memory.RoleEmbedding: memory.TierManaged,
		memory.RoleGradient: memory.TierDevice, memory.RoleOptimizerState: memory.TierDevice,
		memory.RoleActivation: memory.TierDevice, memory.RoleStaging: memory.TierStaging,
		memory.RoleWorkspace: memory.TierDevice,
	}
	require.Len(t, want, int(memory.NumRoles))
	for r := range memory.NumRoles {
		a := mustManagerAlloc(t, m, 1000, r)
		assert.Equal(t, want[r], a.Tier(), "role %s", r)
		assert.Equal(t, r, a.Role())
		assert.Equal(t, int64(1000), a.Size())
		require.Len(t, a.Host(), 1000, "every tier is host memory on the CPU")
		assert.NotZero(t, a.Addr())
		switch r {
		case memory.RoleEmbedding:
			assert.Equal(t, memory.AdvisePreferDevice|memory.AdviseAccessedByDevice|memory.AdvisePrefetchToDevice, a.Advice())
		case memory.RoleFrozenWeight:
			assert.Equal(t, memory.AdviseReadMostly|memory.AdvisePreferDevice|memory.AdviseAccessedByDevice|memory.AdvisePrefetchToDevice, a.Advice())
		default:
			assert.Zero(t, a.Advice())
		}
		require.NoError(t, a.Free())
	}
	for tier := range memory.NumTiers {
		require.NotNil(t, m.Pool(tier))
		assert.Equal(t, tier, m.Pool(tier).Backend().Tier())
	}
	assert.Nil(t, m.Pool(memory.NumTiers))
}

func TestManagerSingleTierPolicy(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Policy: memory.SingleTierPolicy(memory.TierHost)})
	defer func() { require.NoError(t, m.Close()) }()
	for r := range memory.NumRoles {
		a := mustManagerAlloc(t, m, 64, r)
		assert.Equal(t, memory.TierHost, a.Tier(), "SingleTierPolicy(TierHost) is not mistaken for the zero policy")
		require.NoError(t, a.Free())
	}
}

func TestManagerFallback(t *testing.T) {
	addr := func(t memory.Tier) memory.Backend { return memtest.NewAddressBackend(t, 1<<40) }
	for _, c := range []struct {
		name  string
		tiers []memory.Tier
		want  [memory.NumTiers]memory.Tier // where a placement on each tier lands
	}{
		{"host only", []memory.Tier{memory.TierHost},
			[memory.NumTiers]memory.Tier{memory.TierHost, memory.TierHost, memory.TierHost, memory.TierHost, memory.TierHost}},
		{"host+device", []memory.Tier{memory.TierHost, memory.TierDevice},
			[memory.NumTiers]memory.Tier{memory.TierHost, memory.TierDevice, memory.TierDevice, memory.TierHost, memory.TierHost}},
		{"host+managed", []memory.Tier{memory.TierHost, memory.TierManaged},
			[memory.NumTiers]memory.Tier{memory.TierHost, memory.TierHost, memory.TierManaged, memory.TierHost, memory.TierHost}},
		{"no offload", []memory.Tier{memory.TierHost, memory.TierDevice, memory.TierManaged, memory.TierStaging},
			[memory.NumTiers]memory.Tier{memory.TierHost, memory.TierDevice, memory.TierManaged, memory.TierStaging, memory.TierStaging}},
		{"all", []memory.Tier{memory.TierHost, memory.TierDevice, memory.TierManaged, memory.TierStaging, memory.TierOffload},
			[memory.NumTiers]memory.Tier{memory.TierHost, memory.TierDevice, memory.TierManaged, memory.TierStaging, memory.TierOffload}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var backends []memory.Backend
			for _, tier := range c.tiers {
				backends = append(backends, addr(tier))
			}
			m, err := memory.NewManager(backends, memory.Config{})
			require.NoError(t, err)
			for placed := range memory.NumTiers {
				m.SetPolicy(memory.SingleTierPolicy(placed))
				a := mustManagerAlloc(t, m, 4096, memory.RoleGradient)
				assert.Equal(t, c.want[placed], a.Tier(), "placed on %s", placed)
				require.NoError(t, a.Free())
			}
			require.NoError(t, m.Close())
		})
	}

	t.Run("advice dropped out of managed", func(t *testing.T) {
		m, err := memory.NewManager([]memory.Backend{addr(memory.TierDevice)}, memory.Config{})
		require.NoError(t, err)
		a := mustManagerAlloc(t, m, 4096, memory.RoleEmbedding)
		assert.Equal(t, memory.TierDevice, a.Tier())
		assert.Zero(t, a.Advice())
		require.NoError(t, a.Free())

		_, err = m.Alloc(4096, memory.RoleStaging)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "no backend for role staging")
		assert.Contains(t, err.Error(), "places it on staging")
		require.NoError(t, m.Close())
	})
}

func TestNewManagerErrors(t *testing.T) {
	host := memory.NewHostBackend(memory.TierHost)
	for _, c := range []struct {
		name     string
		backends []memory.Backend
		cfg      memory.Config
		msg      string
	}{
		{"none", nil, memory.Config{}, "at least one backend"},
		{"nil", []memory.Backend{host, nil}, memory.Config{}, "backend 1 is nil"},
		{"duplicate", []memory.Backend{host, memtest.NewFaultBackend(host, 0)}, memory.Config{}, "host and fault(host) both provide tier host"},
		{"bad tier", []memory.Backend{memtest.NewAddressBackend(memory.Tier(7), 10)}, memory.Config{}, "unknown Tier(7)"},
		{"negative limit", []memory.Backend{host}, memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: -5}}, "tier device"},
		{"split size", []memory.Backend{host}, memory.Config{MaxSplitSize: MiB}, "max split size"},
		{"policy", []memory.Backend{host}, memory.Config{Policy: memory.SingleTierPolicy(memory.Tier(9))}, "unknown Tier(9)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := memory.NewManager(c.backends, c.cfg)
			require.ErrorIs(t, err, memory.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.msg)
			assert.Nil(t, m)
		})
	}
	assert.Panics(t, func() { memory.NewHostManager(memory.Config{MaxSplitSize: 1}) })
}

func TestManagerStatsAddUp(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	rng := rand.New(rand.NewPCG(3, 4))
	var live []*memory.Allocation
	var requested int64
	for i := range 600 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			requested -= live[k].Size()
			require.NoError(t, m.Free(live[k]))
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			size := int64(1 + rng.IntN(1<<(9+i%14)))
			a := mustManagerAlloc(t, m, size, memory.Role(rng.IntN(int(memory.NumRoles))))
			requested += size
			live = append(live, a)
		}
		if i%50 == 0 {
			require.NoError(t, m.EmptyCache())
		}
		s := m.Stats()
		var tiers memory.Usage
		for tier, u := range s.Tiers {
			assert.Equal(t, m.Pool(memory.Tier(tier)).Stats(), u)
			tiers.Allocated.Current += u.Allocated.Current
			tiers.Requested.Current += u.Requested.Current
			tiers.Reserved.Current += u.Reserved.Current
			tiers.InactiveSplit.Current += u.InactiveSplit.Current
			tiers.Allocs += u.Allocs
			tiers.BackendAllocs += u.BackendAllocs
			assert.LessOrEqual(t, s.Total.Allocated.Peak, sumPeaks(s, func(u memory.Usage) int64 { return u.Allocated.Peak }))
		}
		assert.Equal(t, tiers.Allocated.Current, s.Total.Allocated.Current)
		assert.Equal(t, tiers.Requested.Current, s.Total.Requested.Current)
		assert.Equal(t, tiers.Reserved.Current, s.Total.Reserved.Current)
		assert.Equal(t, tiers.InactiveSplit.Current, s.Total.InactiveSplit.Current)
		assert.Equal(t, tiers.Allocs, s.Total.Allocs)
		assert.Equal(t, tiers.BackendAllocs, s.Total.BackendAllocs)
		var roles memory.RoleUsage
		for _, u := range s.Roles {
			roles.Allocated.Current += u.Allocated.Current
			roles.Requested.Current += u.Requested.Current
			roles.Allocs += u.Allocs
			roles.Frees += u.Frees
		}
		require.Equal(t, s.Total.Allocated.Current, roles.Allocated.Current)
		require.Equal(t, s.Total.Requested.Current, roles.Requested.Current)
		require.Equal(t, requested, s.Total.Requested.Current)
		require.Equal(t, requested, m.InUse())
		require.Equal(t, s.Total.Allocs, roles.Allocs)
		require.Equal(t, int64(len(live)), roles.Allocs-roles.Frees)
	}
	for _, a := range live {
		require.NoError(t, a.Free())
	}
	assert.Zero(t, m.InUse())
	require.NoError(t, m.Close())
}

func sumPeaks(s memory.Stats, f func(memory.Usage) int64) int64 {
	var n int64
	for _, u := range s.Tiers {
		n += f(u)
	}
	return n
}

func TestManagerTotalPeakIsPeakOfSum(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a := mustManagerAlloc(t, m, MiB, memory.RoleGradient) // device tier
	require.NoError(t, a.Free())
	b := mustManagerAlloc(t, m, MiB, memory.RoleStaging) // staging tier
	require.NoError(t, b.Free())
	s := m.Stats()
	assert.Equal(t, MiB, s.Tiers[memory.TierDevice].Requested.Peak)
	assert.Equal(t, MiB, s.Tiers[memory.TierStaging].Requested.Peak)
	assert.Equal(t, MiB, s.Total.Requested.Peak, "never two MiB at once")

	m.ResetPeaks()
	s = m.Stats()
	assert.Zero(t, s.Total.Requested.Peak)
	assert.Zero(t, s.Tiers[memory.TierDevice].Allocated.Peak)
	assert.Zero(t, s.Roles[memory.RoleGradient].Requested.Peak)
	assert.Equal(t, 4*MiB, s.Total.Reserved.Peak, "two small segments are still reserved")
	require.NoError(t, m.Close())
}

func TestManagerSetPolicyAffectsLaterAllocations(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a := mustManagerAlloc(t, m, 100, memory.RoleEmbedding)
	p := m.Policy()
	p.Placements[memory.RoleEmbedding] = memory.Placement{Tier: memory.TierHost}
	m.SetPolicy(p)
	b := mustManagerAlloc(t, m, 100, memory.RoleEmbedding)
	assert.Equal(t, memory.TierManaged, a.Tier())
	assert.Equal(t, memory.TierHost, b.Tier())
	require.NoError(t, a.Free(), "an allocation is freed to the tier it came from")
	require.NoError(t, b.Free())
	s := m.Stats()
	assert.Equal(t, int64(1), s.Tiers[memory.TierManaged].Frees)
	assert.Equal(t, int64(1), s.Tiers[memory.TierHost].Frees)
	assert.Equal(t, int64(2), s.Roles[memory.RoleEmbedding].Frees)

	p.Placements[memory.RoleEmbedding] = memory.Placement{Tier: memory.Tier(11)}
	m.SetPolicy(p)
	_, err := m.Alloc(100, memory.RoleEmbedding)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "Tier(11)")
	require.NoError(t, m.Close())
}

func TestManagerLimits(t *testing.T) {
	noSpill := memory.HybridPolicy()
	noSpill.Spill = false
	m := memory.NewHostManager(memory.Config{Policy: noSpill, Limits: [memory.NumTiers]int64{memory.TierDevice: 4 * MiB}})
	a := mustManagerAlloc(t, m, MiB, memory.RoleActivation)
	_, err := m.Alloc(4*MiB, memory.RoleActivation) // classic: a 20 MiB segment; expandable: 2 more pages
	var oom *memory.OOMError
	require.ErrorAs(t, err, &oom)
	assert.Equal(t, memory.TierDevice, oom.Tier)
	assert.Equal(t, "host(device)", oom.Backend)
	assert.Equal(t, 4*MiB, oom.Limit)
	b := mustManagerAlloc(t, m, 32*MiB, memory.RoleStaging) // other tiers have no limit
	s := m.Stats()
	assert.Equal(t, int64(1), s.Tiers[memory.TierDevice].OOMs)
	assert.Equal(t, int64(1), s.Total.OOMs)
	assert.Equal(t, int64(1), s.Roles[memory.RoleActivation].Allocs, "a failed allocation is not counted")
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
	require.NoError(t, m.Close())
}

func TestManagerErrors(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	for _, n := range []int64{0, -3} {
		_, err := m.Alloc(n, memory.RoleGradient)
		require.ErrorIs(t, err, memory.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "role gradient")
	}
	_, err := m.Alloc(10, memory.NumRoles)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "unknown Role(9)")

	a := mustManagerAlloc(t, m, 10, memory.RoleGradient)
	require.NoError(t, m.Free(a))
	err = a.Free()
	require.ErrorIs(t, err, memory.ErrDoubleFree)
	assert.Contains(t, err.Error(), "freed twice")
	assert.Nil(t, a.Host())
	assert.Zero(t, a.Addr())
	assert.Equal(t, int64(10), a.Size(), "the size stays readable")

	other := memory.NewHostManager(memory.Config{})
	b := mustManagerAlloc(t, other, 10, memory.RoleGradient)
	require.ErrorIs(t, m.Free(b), memory.ErrDoubleFree)
	require.NoError(t, b.Free())
	require.ErrorIs(t, m.Free(nil), memory.ErrInvalidArgument)
	require.ErrorIs(t, (&memory.Allocation{}).Free(), memory.ErrDoubleFree)
	require.NoError(t, other.Close())
	require.NoError(t, m.Close())
}

func TestManagerCloseReportsLeaks(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a := mustManagerAlloc(t, m, 3*MiB, memory.RoleGradient)
	mustManagerAlloc(t, m, MiB, memory.RoleGradient)
	mustManagerAlloc(t, m, 2*KiB, memory.RoleStaging)
	require.NoError(t, a.Free())
	err := m.Close()
	require.ErrorIs(t, err, memory.ErrLeaked)
	assert.Contains(t, err.Error(), "2 live allocations (1.00 MiB requested)")
	assert.Contains(t, err.Error(), "gradient 1 (1.00 MiB)")
	assert.Contains(t, err.Error(), "staging 1 (2.00 KiB)")
	s := m.Stats()
	assert.Zero(t, s.Total.Reserved.Current)
	assert.Zero(t, s.Total.Allocated.Current)
	assert.Zero(t, s.Roles[memory.RoleGradient].Allocated.Current)

	_, err = m.Alloc(1, memory.RoleOther)
	require.ErrorIs(t, err, memory.ErrClosed)
	require.ErrorIs(t, m.Close(), memory.ErrClosed)
	require.ErrorIs(t, m.EmptyCache(), memory.ErrClosed)
	assert.Contains(t, m.Summary(), "(closed)")
}

func TestManagerFreeAfterClose(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	a := mustManagerAlloc(t, m, 100, memory.RoleActivation)
	require.ErrorIs(t, m.Close(), memory.ErrLeaked)
	require.ErrorIs(t, a.Free(), memory.ErrClosed)
	assert.Nil(t, a.Host())
}

// TestManagerLeakedAllocationAfterClose: a leaked allocation's accessors
// keep working once Close released its memory (Stream dereferenced the
// segment of a block an expandable pool's Close had recycled).
func TestManagerLeakedAllocationAfterClose(t *testing.T) {
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m := memory.NewHostManager(memory.Config{Segments: seg})
		a, err := m.AllocStream(100, memory.RoleActivation, 3)
		require.NoError(t, err)
		require.ErrorIs(t, m.Close(), memory.ErrLeaked)
		assert.NotPanics(t, func() { a.Stream() }, "segments %d", seg)
		assert.Zero(t, a.Addr())
		assert.Nil(t, a.Host())
	}
}

func TestManagerSummary(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic})
	a := mustManagerAlloc(t, m, 3*MiB, memory.RoleGradient)
	b := mustManagerAlloc(t, m, 5*KiB, memory.RoleEmbedding)
	c := mustManagerAlloc(t, m, 512, memory.RoleStaging)
	require.NoError(t, c.Free())
	out := m.Summary()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	row := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(strings.TrimPrefix(l, prefix))
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, out)
		return nil
	}
	assert.Equal(t, []string{"host", "device", "managed", "staging", "offload", "total"}, row("tier "))
	assert.Equal(t, []string{"host", "host(device)", "host(managed)", "host(staging)", "host(offload)"}, row("backend "))
	assert.Equal(t, []string{"-", "-", "-", "-", "-", "-"}, row("limit "))
	assert.Equal(t, []string{"0", "B", "3.00", "MiB", "5.00", "KiB", "0", "B", "0", "B", "3.00", "MiB"}, row("allocated      current"))
	assert.Equal(t, []string{"0", "B", "3.00", "MiB", "5.00", "KiB", "512", "B", "0", "B", "3.01", "MiB"}, row("allocated      peak"))
	assert.Equal(t, []string{"0", "B", "20.00", "MiB", "2.00", "MiB", "2.00", "MiB", "0", "B", "24.00", "MiB"}, row("reserved       current"))
	assert.Equal(t, []string{"0", "1", "1", "1", "0", "3"}, row("allocs "))
	assert.Equal(t, []string{"0", "0", "0", "1", "0", "1"}, row("frees "))
	for _, prefix := range []string{"requested      current", "requested      peak", "active         current",
		"active         peak", "inactive split current", "inactive split peak", "reserved       peak"} {
		assert.Len(t, row(prefix+" "), 12, prefix)
	}
	assert.Equal(t, []string{"0", "1", "1", "1", "0", "3"}, row("backend allocs "))
	for _, prefix := range []string{"backend frees ", "OOMs ", "cache flushes "} {
		assert.Equal(t, []string{"0", "0", "0", "0", "0", "0"}, row(prefix), prefix)
	}
	assert.Equal(t, []string{"-", "85.0%", "99.8%", "100.0%", "-", "87.5%"}, row("fragmentation "))
	assert.Equal(t, []string{"3.00", "MiB", "3.00", "MiB", "3.00", "MiB", "3.00", "MiB", "1", "1", "device"}, row("gradient "))
	assert.Equal(t, []string{"5.00", "KiB", "5.00", "KiB", "5.00", "KiB", "5.00", "KiB", "1", "1",
		"managed(prefer-device|accessed-by-device|prefetch-to-device)"}, row("embedding "))
	assert.Equal(t, []string{"0", "B", "512", "B", "0", "B", "512", "B", "0", "1", "staging"}, row("staging "))
	total := row("total ")
	assert.Equal(t, []string{"3.00", "MiB"}, total[:2], "the roles add up to the total")
	assert.Equal(t, []string{"2", "3"}, total[len(total)-2:])
	for _, l := range lines {
		assert.Equal(t, strings.TrimRight(l, " "), l, "no trailing blanks")
	}
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
	require.NoError(t, m.Close())
}

func TestManagerConcurrent(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			var live []*memory.Allocation
			for i := range 2000 {
				if len(live) > 8 || (len(live) > 0 && rng.IntN(2) == 0) {
					a := live[0]
					if err := memtest.Check(a.Host(), byte(a.Size())); err != nil {
						t.Error(err)
						return
					}
					if err := a.Free(); err != nil {
						t.Error(err)
						return
					}
					live = live[1:]
					continue
				}
				a, err := m.Alloc(int64(1+rng.IntN(256<<10)), memory.Role(i%int(memory.NumRoles)))
				if err != nil {
					t.Error(err)
					return
				}
				memtest.Fill(a.Host(), byte(a.Size()))
				live = append(live, a)
			}
			for _, a := range live {
				if err := a.Free(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s := m.Stats()
	assert.Zero(t, s.Total.Allocated.Current)
	assert.Equal(t, s.Total.Allocs, s.Total.Frees)
	require.NoError(t, m.Close())
}
