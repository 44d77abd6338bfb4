package memory_test

import (
	"github.com/strata-ml/strata/memory/memtest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// TestSchedulerKeepsPolicyPlacement: the scheduler promotes only what
// the policy places in the device tier. An embedding table and frozen
// weights, which the hybrid policy places in managed memory (with
// advice), are tracked by default but were "promoted" into the device
// tier after Patience steps, losing their managed placement and advice,
// though nothing had demoted them; an allocation the policy itself
// places in the offload tier was pulled onto the device the same way.
// A spilled activation-like tensor of a device role is still promoted.
func TestSchedulerKeepsPolicyPlacement(t *testing.T) {
	pol := memory.HybridPolicy()
	pol.Placements[memory.RoleOptimizerState] = memory.Placement{Tier: memory.TierOffload}
	m := memory.NewHostManager(memory.Config{Policy: pol})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 64 * MiB, Patience: 1})
	require.NoError(t, err)
	emb := mustManagerAlloc(t, m, 4*MiB, memory.RoleEmbedding)
	frozen := mustManagerAlloc(t, m, 2*MiB, memory.RoleFrozenWeight)
	opt := mustManagerAlloc(t, m, 2*MiB, memory.RoleOptimizerState)
	w := mustManagerAlloc(t, m, 2*MiB, memory.RoleParameter)
	require.Equal(t, memory.TierManaged, emb.Tier())
	require.Equal(t, memory.TierOffload, opt.Tier())
	require.NoError(t, m.Migrate(w, memory.TierOffload)) // as a demotion or a spill would
	wantAdvice := emb.Advice()
	require.NotZero(t, wantAdvice)
	for range 3 {
		schedStep(t, m, map[*memory.Allocation]int{emb: 4, frozen: 4, opt: 4, w: 4}, MiB)
		p, err := s.Step()
		require.NoError(t, err)
		t.Log("\n" + p.String())
	}
	assert.Equal(t, memory.TierManaged, emb.Tier(), "the policy places embeddings in managed memory")
	assert.Equal(t, wantAdvice, emb.Advice())
	assert.Equal(t, memory.TierManaged, frozen.Tier(), "the policy places frozen weights in managed memory")
	assert.Equal(t, memory.TierOffload, opt.Tier(), "the policy places optimizer state in the offload tier")
	assert.Equal(t, memory.TierDevice, w.Tier(), "a parameter off the device is promoted back")
	for _, a := range []*memory.Allocation{emb, frozen, opt, w} {
		require.NoError(t, a.Free())
	}
}

// TestSummaryNamesTheSpillTier: without an offload backend the device
// tier's overflow goes to staging memory (the fallback chain), and the
// summary said "spilled to offload" all the same.
func TestSummaryNamesTheSpillTier(t *testing.T) {
	m, err := memory.NewManager([]memory.Backend{
		memory.NewHostBackend(memory.TierDevice),
		memory.NewHostBackend(memory.TierStaging),
		memory.NewHostBackend(memory.TierHost),
	}, memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 2 * MiB}})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	var ev memory.SpillEvent
	m.OnSpill(func(e memory.SpillEvent) { ev = e })
	a, err := m.Alloc(4*MiB, memory.RoleActivation)
	require.NoError(t, err)
	require.Equal(t, memory.TierStaging, a.Tier())
	require.Equal(t, memory.TierStaging, ev.To)
	assert.Contains(t, m.Summary(), "spilled to staging: 1 allocations, 4.00 MiB")
	require.NoError(t, a.Free())
}

// TestManagerPlacementConcurrent: allocations, migrations (Migrate,
// MigrateOn), holds, limit changes, statistics and scheduler steps from
// several goroutines at once (run with -race).
func TestManagerPlacementConcurrent(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss, Limits: [memory.NumTiers]int64{memory.TierDevice: 64 * MiB}})
	s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 48 * MiB, Patience: 1, MinBytes: 1})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				a, err := m.AllocStream(int64(1+i%7)*MiB/2, memory.Role(i%int(memory.NumRoles)), 0)
				if err != nil {
					errs <- err
					return
				}
				a.Touch()
				switch i % 5 {
				case 0:
					_ = m.Migrate(a, memory.TierOffload)
				case 1:
					_ = m.MigrateOn(a, memory.TierStaging, memory.Stream(10+g))
				case 2:
					if r, err := m.Hold(memory.TierDevice, MiB); err == nil {
						r()
					}
				case 3:
					_ = m.SetLimit(memory.TierDevice, int64(48+i%32)*MiB)
				case 4:
					a.SetLabel("x")
					_ = a.Label()
					_ = a.Stream()
				}
				_ = m.Stats()
				_ = m.Summary()
				_ = m.Limit(memory.TierDevice)
				_ = m.InUse()
				if err := a.Free(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 100 {
			if _, err := s.Step(); err != nil {
				errs <- err
				return
			}
			ss.CompleteAll()
			_ = m.EmptyCache()
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ss.CompleteAll()
	require.NoError(t, m.Close())
}

// TestMigrateRoundTripEveryTierPair: Migrate between every pair of tiers,
// classic and expandable, keeps the bytes and the statistics.
func TestMigrateRoundTripEveryTierPair(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m := memory.NewHostManager(memory.Config{Segments: mode})
		var keep []*memory.Allocation
		for _, size := range []int64{1, 100, 4096, MiB + 3, 21 * MiB} {
			for from := range memory.NumTiers {
				for to := range memory.NumTiers {
					pol := memory.SingleTierPolicy(from)
					m.SetPolicy(pol)
					a := mustManagerAlloc(t, m, size, memory.RoleParameter)
					keep = append(keep, mustManagerAlloc(t, m, size, memory.RoleParameter))
					require.Equal(t, from, a.Tier())
					memtest.Fill(a.Host(), byte(size))
					want := append([]byte(nil), a.Host()...)
					require.NoError(t, m.Migrate(a, to))
					require.Equal(t, to, a.Tier())
					require.Equal(t, want, a.Host(), "%d %s->%s", size, from, to)
					st := m.Stats()
					require.Equal(t, st.Total.Requested.Current, st.Roles[memory.RoleParameter].Requested.Current)
					require.Equal(t, st.Total.Allocated.Current, st.Roles[memory.RoleParameter].Allocated.Current)
					require.NoError(t, a.Free())
				}
			}
		}
		for _, a := range keep {
			require.NoError(t, a.Free())
		}
		st := m.Stats()
		for tt := range memory.NumTiers {
			require.Zero(t, st.Tiers[tt].Allocated.Current)
			require.Zero(t, st.Tiers[tt].Requested.Current)
		}
		require.NoError(t, m.Close())
	}
}
