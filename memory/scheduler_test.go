package memory_test

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func TestMigrate(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	a := mustManagerAlloc(t, m, 3*MiB+5, memory.RoleOptimizerState)
	want := bytes.Repeat([]byte("strata"), int(a.Size())/6+1)[:a.Size()]
	copy(a.Host(), want)
	a.SetLabel("adamw.m:w")
	a.Touch()
	require.NoError(t, m.Migrate(a, memory.TierOffload))
	assert.Equal(t, memory.TierOffload, a.Tier())
	assert.Equal(t, want, a.Host(), "the bytes moved with it")
	assert.Equal(t, "adamw.m:w", a.Label())
	assert.Equal(t, int64(1), a.Touches())
	s := m.Stats()
	assert.Zero(t, s.Tiers[memory.TierDevice].Allocated.Current)
	assert.Equal(t, int64(3*MiB+5), s.Tiers[memory.TierOffload].Requested.Current)
	assert.Equal(t, int64(3*MiB+512), s.Roles[memory.RoleOptimizerState].Allocated.Current)
	assert.Equal(t, memory.Moved{Count: 1, Bytes: 3*MiB + 5}, s.Migrations)
	require.NoError(t, m.Migrate(a, memory.TierOffload), "to its own tier: nothing")
	require.NoError(t, m.Migrate(a, memory.TierDevice))
	assert.Equal(t, want, a.Host())
	require.ErrorIs(t, m.Migrate(a, memory.NumTiers), memory.ErrInvalidArgument)
	require.NoError(t, a.Free())
	assert.Zero(t, m.Stats().Total.Requested.Current)
	require.ErrorIs(t, m.Migrate(a, memory.TierOffload), memory.ErrDoubleFree)
}

// schedStep runs one fake training step: every tracked tensor touched as
// often as uses says, and an activation of act bytes held for the step.
func schedStep(t *testing.T, m *memory.Manager, uses map[*memory.Allocation]int, act int64) {
	t.Helper()
	for a, n := range uses {
		for range n {
			a.Touch()
		}
	}
	x := mustManagerAlloc(t, m, act, memory.RoleActivation)
	require.NoError(t, x.Free())
}

func TestSchedulerUnderBudget(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 30 * MiB, Patience: 2})
	require.NoError(t, err)
	w := mustManagerAlloc(t, m, 8*MiB, memory.RoleParameter)
	w.SetLabel("w")
	mom := mustManagerAlloc(t, m, 8*MiB, memory.RoleOptimizerState)
	mom.SetLabel("adamw.m:w")
	vel := mustManagerAlloc(t, m, 6*MiB, memory.RoleOptimizerState)
	vel.SetLabel("adamw.v:w")
	small := mustManagerAlloc(t, m, 4096, memory.RoleParameter) // below MinBytes: not tracked
	uses := map[*memory.Allocation]int{w: 5, mom: 1, vel: 1}

	// 22 MiB of state and a 10 MiB activation pass 95% of 30 MiB: the
	// larger of the two coldest tensors goes.
	schedStep(t, m, uses, 10*MiB)
	p, err := s.Step()
	require.NoError(t, err)
	t.Log("\n" + p.String())
	require.Len(t, p.Entries, 3)
	assert.Equal(t, memory.TierOffload, mom.Tier())
	assert.Equal(t, memory.TierDevice, vel.Tier())
	assert.Equal(t, memory.TierDevice, w.Tier())
	assert.Equal(t, int64(8*MiB), p.Demoted)
	assert.GreaterOrEqual(t, p.Demand, int64(32*MiB))
	e := p.Entries[0]
	assert.Equal(t, "adamw.m:w", e.Label, "coldest and largest first")
	assert.True(t, e.Moved)
	assert.Contains(t, e.Why, "demoted")
	assert.InDelta(t, 1, e.Touches, 1e-9)
	assert.Contains(t, p.String(), "adamw.m:w")

	// The same steps now fit: nothing moves back (hysteresis), nothing else goes.
	for range 4 {
		schedStep(t, m, uses, 10*MiB)
		p, err = s.Step()
		require.NoError(t, err)
		assert.Zero(t, p.Demoted+p.Promoted, "\n%s", p)
		assert.True(t, p.Settled(), "\n%s", p)
		assert.Equal(t, int64(8*MiB), p.OffloadTraffic(), "8 MiB off the device, touched once a step")
	}
	assert.Equal(t, memory.TierOffload, mom.Tier())

	// Smaller activations leave room: after Patience steps it comes back.
	schedStep(t, m, uses, MiB)
	p, err = s.Step()
	require.NoError(t, err)
	assert.Equal(t, memory.TierOffload, mom.Tier(), "waits: patience")
	assert.Equal(t, int64(8*MiB), p.Pending, "\n%s", p)
	assert.False(t, p.Settled())
	schedStep(t, m, uses, MiB)
	p, err = s.Step()
	require.NoError(t, err)
	assert.Equal(t, memory.TierDevice, mom.Tier())
	assert.Equal(t, int64(8*MiB), p.Promoted)
	assert.Zero(t, p.Pending)
	assert.Zero(t, p.OffloadTraffic())
	assert.Equal(t, int64(2), m.Stats().Migrations.Count)
	for _, a := range []*memory.Allocation{w, mom, vel, small} {
		require.NoError(t, a.Free())
	}
	p, err = s.Step()
	require.NoError(t, err)
	assert.Empty(t, p.Entries, "freed allocations leave the plan")
	s.Close()
}

func TestSchedulerRules(t *testing.T) {
	t.Run("hot tensors stay, cold ones go without pressure", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{})
		s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 10 * MiB, HotTouches: 3, ColdTouches: 1})
		require.NoError(t, err)
		w := mustManagerAlloc(t, m, 8*MiB, memory.RoleParameter)
		g := mustManagerAlloc(t, m, 8*MiB, memory.RoleGradient)
		v := mustManagerAlloc(t, m, 2*MiB, memory.RoleOptimizerState)
		schedStep(t, m, map[*memory.Allocation]int{w: 5, g: 2, v: 1}, 8*MiB)
		p, err := s.Step()
		require.NoError(t, err)
		t.Log("\n" + p.String())
		assert.Equal(t, memory.TierDevice, w.Tier(), "hot: never demoted")
		assert.Equal(t, memory.TierOffload, g.Tier(), "under pressure")
		assert.Equal(t, memory.TierOffload, v.Tier(), "cold")
		for _, a := range []*memory.Allocation{w, g, v} {
			require.NoError(t, a.Free())
		}
		require.NoError(t, m.Close())
	})
	t.Run("no budget, no limit: nothing moves", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{})
		s, err := m.NewScheduler(memory.SchedulerConfig{})
		require.NoError(t, err)
		w := mustManagerAlloc(t, m, 64*MiB, memory.RoleParameter)
		schedStep(t, m, map[*memory.Allocation]int{w: 0}, 64*MiB)
		p, err := s.Step()
		require.NoError(t, err)
		assert.Equal(t, memory.TierDevice, w.Tier())
		assert.Equal(t, "device: no budget", p.Entries[0].Why)
		require.NoError(t, w.Free())
		require.NoError(t, m.Close())
	})
	t.Run("no churn while the step does not fit", func(t *testing.T) {
		// A step needing 40 MiB of activations under a 16 MiB budget: every
		// tracked tensor goes cold once, nothing comes back, and the plan
		// says how much the scheduler could not cover.
		m := memory.NewHostManager(memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 16 * MiB}})
		m.OnSpill(func(memory.SpillEvent) {})
		s, err := m.NewScheduler(memory.SchedulerConfig{Patience: 1})
		require.NoError(t, err)
		w := mustManagerAlloc(t, m, 4*MiB, memory.RoleParameter)
		v := mustManagerAlloc(t, m, 4*MiB, memory.RoleOptimizerState)
		for i := range 8 {
			for range 4 {
				w.Touch()
			}
			v.Touch()
			var acts []*memory.Allocation
			for range 10 {
				acts = append(acts, mustManagerAlloc(t, m, 4*MiB, memory.RoleActivation))
			}
			for _, a := range acts {
				require.NoError(t, a.Free())
			}
			p, err := s.Step()
			require.NoError(t, err)
			if i == 0 {
				assert.Equal(t, int64(8*MiB), p.Demoted)
			} else {
				assert.Zero(t, p.Demoted+p.Promoted, "step %d\n%s", i+1, p)
			}
			assert.Positive(t, p.Excess)
		}
		assert.Equal(t, int64(8*MiB), m.Stats().Migrations.Bytes)
		require.NoError(t, w.Free())
		require.NoError(t, v.Free())
		require.NoError(t, m.Close())
	})
	t.Run("the device limit is the budget; spills count as demand", func(t *testing.T) {
		// 8 MiB held under a 16 MiB limit refuse a 12 MiB request: the
		// budget at work (8 + 12 > 16), not fragmentation, so the target
		// stays the budget less its margin.
		m := memory.NewHostManager(memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 16 * MiB}})
		m.OnSpill(func(memory.SpillEvent) {})
		s, err := m.NewScheduler(memory.SchedulerConfig{})
		require.NoError(t, err)
		v := mustManagerAlloc(t, m, 8*MiB, memory.RoleOptimizerState)
		schedStep(t, m, map[*memory.Allocation]int{v: 1}, 12*MiB) // spills
		require.Equal(t, int64(1), m.Stats().Spills.Count)
		p, err := s.Step()
		require.NoError(t, err)
		assert.Equal(t, int64(16*MiB), p.Budget)
		assert.InDelta(t, float64(16*MiB-16*MiB/20), float64(p.Target), 1, "a request past the budget is not fragmentation")
		assert.GreaterOrEqual(t, p.Demand, int64(20*MiB))
		assert.Equal(t, memory.TierOffload, v.Tier())
		schedStep(t, m, map[*memory.Allocation]int{v: 1}, 12*MiB)
		assert.Equal(t, int64(1), m.Stats().Spills.Count, "the activation fits now")
		require.NoError(t, v.Free())
		require.NoError(t, m.Close())
	})
	t.Run("fragmentation lowers the target", func(t *testing.T) {
		// Classic segments under a 24 MiB limit: with a 3 MiB tensor in a
		// 20 MiB segment an 18 MiB request finds no room (20 + 18 > 24)
		// although 3 MiB is far below the budget: the device held 3 MiB
		// when it refused, so the target drops under that and the tensor
		// goes cold.
		m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Limits: [memory.NumTiers]int64{memory.TierDevice: 24 * MiB}})
		m.OnSpill(func(memory.SpillEvent) {})
		s, err := m.NewScheduler(memory.SchedulerConfig{})
		require.NoError(t, err)
		v := mustManagerAlloc(t, m, 3*MiB, memory.RoleOptimizerState)
		schedStep(t, m, map[*memory.Allocation]int{v: 1}, 18*MiB)
		p, err := s.Step()
		require.NoError(t, err)
		t.Log("\n" + p.String())
		assert.Less(t, p.Target, int64(3*MiB))
		assert.Equal(t, memory.TierOffload, v.Tier())
		require.NoError(t, v.Free())
		require.NoError(t, m.Close())
	})
	t.Run("the level of a refusal is forgotten after Retry quiet steps", func(t *testing.T) {
		// The setup above, Retry 2, Patience 1: the refusal's level holds
		// for two quiet steps, then the budget is aimed at again and the
		// tensor comes back; the same refusal lowers the target again, and
		// the next forgetting waits twice as long.
		m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsClassic, Limits: [memory.NumTiers]int64{memory.TierDevice: 24 * MiB}})
		m.OnSpill(func(memory.SpillEvent) {})
		s, err := m.NewScheduler(memory.SchedulerConfig{Retry: 2, Patience: 1})
		require.NoError(t, err)
		v := mustManagerAlloc(t, m, 3*MiB, memory.RoleOptimizerState)
		uses := map[*memory.Allocation]int{v: 1}
		full := int64(24*MiB - 24*MiB/20)
		step := func(act int64) memory.Plan {
			schedStep(t, m, uses, act)
			p, err := s.Step()
			require.NoError(t, err)
			return p
		}
		p := step(18 * MiB)
		require.Less(t, p.Target, int64(3*MiB))
		require.Equal(t, memory.TierOffload, v.Tier())
		for i := range 2 {
			p = step(MiB)
			assert.Equal(t, i == 1, p.Retried, "step %d", i)
		}
		assert.InDelta(t, float64(full), float64(p.Target), 1, "\n%s", p)
		assert.Contains(t, p.String(), "forgotten")
		assert.Equal(t, memory.TierDevice, v.Tier(), "back once the target has room\n%s", p)
		require.NoError(t, m.EmptyCache())
		p = step(18 * MiB) // v, now in its own segment, leaves no room again
		require.Less(t, p.Target, int64(3*MiB), "\n%s", p)
		for i := range 4 {
			p = step(MiB)
			assert.Equal(t, i == 3, p.Retried, "step %d: twice Retry after a refusal that followed a forgetting", i)
		}
		require.NoError(t, v.Free())
		require.NoError(t, m.Close())

		_, err = memory.NewHostManager(memory.Config{}).NewScheduler(memory.SchedulerConfig{Retry: -1})
		require.NoError(t, err, "negative: never forgotten")
	})
	t.Run("Track and bad configs", func(t *testing.T) {
		m := memory.NewHostManager(memory.Config{})
		a := mustManagerAlloc(t, m, 2*MiB, memory.RoleActivation)
		s, err := m.NewScheduler(memory.SchedulerConfig{ColdTouches: 1})
		require.NoError(t, err)
		require.NoError(t, s.Track(a))
		p, err := s.Step()
		require.NoError(t, err)
		require.Len(t, p.Entries, 1)
		assert.Equal(t, memory.TierOffload, a.Tier())
		require.NoError(t, a.Free())
		require.ErrorIs(t, s.Track(a), memory.ErrDoubleFree)
		for _, c := range []memory.SchedulerConfig{{Margin: 1}, {Margin: math.NaN()}, {Budget: -1}, {Decay: 1}, {Decay: math.NaN()}, {HotTouches: math.NaN()}, {Roles: []memory.Role{memory.NumRoles}}} {
			_, err := m.NewScheduler(c)
			require.ErrorIs(t, err, memory.ErrInvalidArgument, "%+v", c)
		}
		require.NoError(t, m.Close())
		_, err = s.Step()
		require.ErrorIs(t, err, memory.ErrClosed)
	})
}

// TestMigrateBarrier: Migrate calls the barrier with the copy's stream
// before copying; a failing barrier moves nothing.
func TestMigrateBarrier(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	a := mustManagerAlloc(t, m, MiB, memory.RoleOptimizerState)
	defer func() { require.NoError(t, a.Free()) }()
	var calls []memory.Stream
	fail := errors.New("side stream broken")
	var ret error
	m.SetMigrateBarrier(func(s memory.Stream) error { calls = append(calls, s); return ret })
	require.NoError(t, m.Migrate(a, memory.TierOffload))
	require.Len(t, calls, 1, "one barrier before the copy")
	require.Equal(t, memory.TierOffload, a.Tier())
	ret = fail
	err := m.Migrate(a, memory.TierDevice)
	require.ErrorIs(t, err, fail)
	require.ErrorContains(t, err, "ordering the copy after other streams")
	require.Equal(t, memory.TierOffload, a.Tier(), "nothing moved")
	m.SetMigrateBarrier(nil)
	require.NoError(t, m.Migrate(a, memory.TierDevice))
	require.Len(t, calls, 2)
}

// TestSchedulerSkipsCrossStreamBlocks: an allocation used on another
// stream (RecordStream) cannot migrate; the scheduler leaves it where it
// is for the step and says why, instead of failing.
func TestSchedulerSkipsCrossStreamBlocks(t *testing.T) {
	m := memory.NewHostManager(memory.Config{StreamSync: memtest.NewStreamSync()})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 10 * MiB})
	require.NoError(t, err)
	defer s.Close()
	g := mustManagerAlloc(t, m, 8*MiB, memory.RoleGradient)
	require.NoError(t, m.RecordStream(g, 7))
	schedStep(t, m, map[*memory.Allocation]int{g: 1}, 8*MiB)
	p, err := s.Step()
	require.NoError(t, err)
	require.Equal(t, memory.TierDevice, g.Tier())
	require.Contains(t, p.Entries[0].Why, "another stream")
	require.NoError(t, g.Free())
}

// TestReplacedSchedulerStep: a scheduler replaced by a second one no
// longer hears of frees; its Step neither crashes on the allocations
// freed since nor plans anything: it fails with ErrClosed.
func TestReplacedSchedulerStep(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer func() { require.NoError(t, m.Close()) }()
	s1, err := m.NewScheduler(memory.SchedulerConfig{ColdTouches: 1})
	require.NoError(t, err)
	a := mustManagerAlloc(t, m, 4*MiB, memory.RoleParameter)
	b := mustManagerAlloc(t, m, 4*MiB, memory.RoleParameter)
	s2, err := m.NewScheduler(memory.SchedulerConfig{})
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
	var plan memory.Plan
	require.NotPanics(t, func() { plan, err = s1.Step() })
	require.ErrorIs(t, err, memory.ErrClosed)
	assert.Empty(t, plan.Entries, "the freed allocations are not planned")
}

// TestSchedulerPromotionRefused: a cold tensor whose promotion the device
// refuses although the budget has room (a classic pool's segments, each
// pinned by a small block, hold no free block it fits) stays cold, and the
// Step goes on: a promotion is no reason to stop training.
func TestSchedulerPromotionRefused(t *testing.T) {
	var limits [memory.NumTiers]int64
	limits[memory.TierDevice] = 40 * MiB
	m := memory.NewHostManager(memory.Config{Limits: limits, Segments: memory.SegmentsClassic})
	m.OnSpill(func(memory.SpillEvent) {})
	s, err := m.NewScheduler(memory.SchedulerConfig{Patience: 1})
	require.NoError(t, err)
	big := mustManagerAlloc(t, m, 19*MiB, memory.RoleParameter)
	memtest.Fill(big.Host(), 4)
	require.NoError(t, m.Migrate(big, memory.TierOffload))
	require.NoError(t, m.EmptyCache())
	// Two 20 MiB segments, each pinned by a 2 MiB block: 4 MiB allocated,
	// the whole limit reserved, no free block of 19 MiB.
	var pins, fills []*memory.Allocation
	for range 2 {
		pins = append(pins, mustManagerAlloc(t, m, 2*MiB, memory.RoleActivation))
		fills = append(fills, mustManagerAlloc(t, m, 17*MiB, memory.RoleActivation))
	}
	for _, f := range fills {
		require.NoError(t, f.Free())
	}
	_, err = s.Step() // the step that made the segments: no room for big
	require.NoError(t, err)
	big.Touch()
	plan, err := s.Step()
	require.NoError(t, err, "a refused promotion does not fail the step")
	assert.Equal(t, memory.TierOffload, big.Tier())
	assert.Zero(t, plan.Promoted)
	require.Len(t, plan.Entries, 1)
	assert.Contains(t, plan.Entries[0].Why, "refused")
	require.NoError(t, memtest.Check(big.Host(), 4))
	plan, err = s.Step()
	require.NoError(t, err)
	assert.Less(t, plan.Target, int64(4*MiB), "the target drops under what the device held at the refusal")
	for _, p := range pins {
		require.NoError(t, p.Free())
	}
	require.NoError(t, big.Free())
	require.NoError(t, m.Close())
}

// TestSchedulerDemotionRefused: a demotion the offload tier refuses (its
// limit reached) leaves the tensor on the device, its data intact, and
// does not fail the step (which stopped training in nn.Placement and
// train-gpt); the step's other demotions are not tried, and the plan's
// excess says what still passes the target. Room in the offload tier lets
// the next step demote.
func TestSchedulerDemotionRefused(t *testing.T) {
	var limits [memory.NumTiers]int64
	limits[memory.TierOffload] = 4 * MiB
	m := memory.NewHostManager(memory.Config{Limits: limits})
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewScheduler(memory.SchedulerConfig{Budget: 30 * MiB, Patience: 2})
	require.NoError(t, err)
	mom := mustManagerAlloc(t, m, 8*MiB, memory.RoleOptimizerState)
	mom.SetLabel("adamw.m:w")
	memtest.Fill(mom.Host(), 7)
	vel := mustManagerAlloc(t, m, 6*MiB, memory.RoleOptimizerState)
	vel.SetLabel("adamw.v:w")
	w := mustManagerAlloc(t, m, 8*MiB, memory.RoleParameter)
	uses := map[*memory.Allocation]int{w: 5, mom: 1, vel: 1}

	schedStep(t, m, uses, 10*MiB)
	p, err := s.Step()
	require.NoError(t, err, "a refused demotion does not fail the step")
	t.Log("\n" + p.String())
	assert.Equal(t, memory.TierDevice, mom.Tier())
	assert.Equal(t, memory.TierDevice, vel.Tier())
	assert.Zero(t, p.Demoted)
	assert.Positive(t, p.Excess)
	why := map[string]string{}
	for _, e := range p.Entries {
		why[e.Label] = e.Why
	}
	assert.Contains(t, why["adamw.m:w"], "refused it")
	assert.Contains(t, why["adamw.v:w"], "refused an earlier demotion")
	require.NoError(t, memtest.Check(mom.Host(), 7))

	require.NoError(t, m.SetLimit(memory.TierOffload, 0)) // no limit
	schedStep(t, m, uses, 10*MiB)
	p, err = s.Step()
	require.NoError(t, err)
	assert.Equal(t, memory.TierOffload, mom.Tier(), "\n%s", p)
	require.NoError(t, memtest.Check(mom.Host(), 7))
	for _, a := range []*memory.Allocation{mom, vel, w} {
		require.NoError(t, a.Free())
	}
}
