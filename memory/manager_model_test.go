package memory_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// modelAlloc is the model's view of a live allocation.
type modelAlloc struct {
	a    *memory.Allocation
	size int64
	role memory.Role
	tier memory.Tier
	seed byte
}

// TestManagerModel drives a host manager with small per-tier limits (and a
// small host budget, or backends that fail now and then) through random
// Alloc, Free (and double frees and use after free), Migrate, MigrateOn,
// RecordStream, SetLimit, Hold, SetPolicy, EmptyCache, EmptyStreamCache,
// ResetPeaks and Scheduler steps, and checks after every step what the docs
// promise against a model of the live allocations: per role and per tier
// requested bytes and live counts, allocated bytes at least the requests
// rounded to 512 B, totals the sums of the tiers, peaks at least every
// current seen (and the total's at least any tier's or role's), no overlap
// of live blocks, every byte of every live allocation kept, the tier each
// allocation lands in (the policy's, or the offload tier for a spill
// counted in Stats.Spills and reported once by OnSpill), limits never
// passed by a growth (the device limit counting the managed tier's
// reserved bytes, which only managed growth may push past it, and holds),
// errors of the documented kinds, a failed operation leaving the
// accounting unchanged, EmptyCache leaving no segment without a block in
// use, and Close with live allocations reporting them and giving every
// byte back.
func TestManagerModel(t *testing.T) {
	seeds := uint64(6)
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
			t.Run(fmt.Sprintf("seed%d/mode%d", seed, mode), func(t *testing.T) {
				runManagerModel(t, seed, mode, false)
			})
		}
		t.Run(fmt.Sprintf("seed%d/faults", seed), func(t *testing.T) {
			runManagerModel(t, seed, memory.SegmentsClassic, true)
		})
	}
}

func runManagerModel(t *testing.T, seed uint64, mode memory.SegmentMode, faults bool) {
	rng := rand.New(rand.NewPCG(seed, 77+uint64(mode)))
	budget := []int64{256 << 20, 40 << 20}[rng.IntN(2)]
	b := memory.NewHostBudget(budget, "model")
	var limits [memory.NumTiers]int64
	limitChoices := []int64{0, 1, 4096, 1 << 20, 2 << 20, 3<<20 + 512, 4 << 20, 8 << 20, 24 << 20, 48 << 20}
	for tr := range memory.NumTiers {
		limits[tr] = limitChoices[rng.IntN(len(limitChoices))]
	}
	ss := memtest.NewStreamSync()
	cfg := memory.Config{Segments: mode, Limits: limits, StreamSync: ss}
	if rng.IntN(3) == 0 {
		cfg.MaxSplitSize = 24 << 20
	}
	var sched *memory.Scheduler
	var m *memory.Manager
	var fbs []*memtest.FaultBackend
	if faults {
		var bs []memory.Backend
		for tr := range memory.NumTiers {
			f := memtest.NewFaultBackend(memory.NewHostBackend(tr), 0)
			fbs = append(fbs, f)
			bs = append(bs, memory.NewBudgetBackend(f, b))
		}
		var err error
		if m, err = memory.NewManager(bs, cfg); err != nil {
			t.Fatal(err)
		}
	} else {
		m = memory.NewBudgetHostManager(cfg, b)
	}
	var spillEvents []memory.SpillEvent
	m.OnSpill(func(ev memory.SpillEvent) { spillEvents = append(spillEvents, ev) })
	policy := memory.HybridPolicy()

	var live []modelAlloc
	var freed []*memory.Allocation
	var maxTotalAlloc, maxTotalReq int64
	var spills memory.Moved
	nextSeed := byte(1)

	routeOf := func(r memory.Role) memory.Tier { return policy.Placements[r].Tier }
	check := func(step int, what string) {
		t.Helper()
		where := fmt.Sprintf("step %d (%s)", step, what)
		st := m.Stats()
		var roleReq [memory.NumRoles]int64
		var roleN [memory.NumRoles]int64
		var tierReq, tierRound [memory.NumTiers]int64
		var totReq int64
		for _, l := range live {
			if l.a.Tier() != l.tier {
				t.Fatalf("%s: allocation of %d for %s in %s, model says %s", where, l.size, l.role, l.a.Tier(), l.tier)
			}
			if got := int64(len(l.a.Host())); got != l.size {
				t.Fatalf("%s: Host() of %d bytes, want %d", where, got, l.size)
			}
			if err := memtest.Check(l.a.Host(), l.seed); err != nil {
				t.Fatalf("%s: %d bytes for %s in %s overwritten: %v", where, l.size, l.role, l.tier, err)
			}
			roleReq[l.role] += l.size
			roleN[l.role]++
			tierReq[l.tier] += l.size
			tierRound[l.tier] += (l.size + 511) &^ 511
			totReq += l.size
		}
		for r := range memory.NumRoles {
			ru := st.Roles[r]
			if ru.Requested.Current != roleReq[r] || ru.Allocs-ru.Frees != roleN[r] {
				t.Fatalf("%s: role %s: requested %d, live %d; model %d, %d", where, memory.Role(r), ru.Requested.Current, ru.Allocs-ru.Frees, roleReq[r], roleN[r])
			}
			if ru.Allocated.Peak < ru.Allocated.Current || ru.Requested.Peak < ru.Requested.Current {
				t.Fatalf("%s: role %s: peak below current: %+v", where, memory.Role(r), ru)
			}
		}
		var sumAlloc, sumRes int64
		for tr := range memory.NumTiers {
			u := st.Tiers[tr]
			if u.Requested.Current != tierReq[tr] {
				t.Fatalf("%s: tier %s: requested %d, model %d", where, memory.Tier(tr), u.Requested.Current, tierReq[tr])
			}
			if u.Allocated.Current < tierRound[tr] {
				t.Fatalf("%s: tier %s: allocated %d below the rounded requests %d", where, memory.Tier(tr), u.Allocated.Current, tierRound[tr])
			}
			if u.Reserved.Current < u.Allocated.Current {
				t.Fatalf("%s: tier %s: reserved %d below allocated %d", where, memory.Tier(tr), u.Reserved.Current, u.Allocated.Current)
			}
			for _, s := range []memory.Stat{u.Allocated, u.Requested, u.Reserved, u.Active, u.InactiveSplit} {
				if s.Peak < s.Current || s.Current < 0 {
					t.Fatalf("%s: tier %s: bad stat %+v in %+v", where, memory.Tier(tr), s, u)
				}
			}
			if st.Limits[tr] != limits[tr] {
				t.Fatalf("%s: tier %s: Stats.Limits %d, set %d", where, memory.Tier(tr), st.Limits[tr], limits[tr])
			}
			if m.Limit(memory.Tier(tr)) != limits[tr] {
				t.Fatalf("%s: tier %s: Limit %d, set %d", where, memory.Tier(tr), m.Limit(memory.Tier(tr)), limits[tr])
			}
			sumAlloc += u.Allocated.Current
			sumRes += u.Reserved.Current
		}
		if st.Total.Requested.Current != totReq || st.Total.Allocated.Current != sumAlloc || st.Total.Reserved.Current != sumRes {
			t.Fatalf("%s: total %+v; model requested %d, tiers allocated %d reserved %d", where, st.Total, totReq, sumAlloc, sumRes)
		}
		if n := st.Total.Allocs - st.Total.Frees; n != int64(len(live)) {
			t.Fatalf("%s: the tiers count %d live blocks, model %d", where, n, len(live))
		}
		if m.InUse() != totReq {
			t.Fatalf("%s: InUse %d, model %d", where, m.InUse(), totReq)
		}
		maxTotalAlloc = max(maxTotalAlloc, st.Total.Allocated.Current)
		maxTotalReq = max(maxTotalReq, totReq)
		if st.Total.Allocated.Peak < maxTotalAlloc || st.Total.Requested.Peak < maxTotalReq {
			t.Fatalf("%s: total peaks %d/%d below seen %d/%d", where, st.Total.Allocated.Peak, st.Total.Requested.Peak, maxTotalAlloc, maxTotalReq)
		}
		checkUsageConsistent(t, m, where)
		if st.Spills != spills {
			t.Fatalf("%s: Spills %+v, model %+v", where, st.Spills, spills)
		}
		// No overlap of live blocks.
		for i := range live {
			for j := i + 1; j < len(live); j++ {
				a0, a1 := live[i].a.Addr(), live[j].a.Addr()
				if a0 < a1+uintptr(live[j].size) && a1 < a0+uintptr(live[i].size) {
					t.Fatalf("%s: live blocks overlap: %#x+%d and %#x+%d", where, a0, live[i].size, a1, live[j].size)
				}
			}
		}
		for tr := range memory.NumTiers {
			u := st.Tiers[tr]
			if u.Allocated.Peak > st.Total.Allocated.Peak || u.Reserved.Peak > st.Total.Reserved.Peak || u.Requested.Peak > st.Total.Requested.Peak {
				t.Fatalf("%s: tier %s peaks %+v above the total's %+v", where, memory.Tier(tr), u, st.Total)
			}
		}
		for r := range memory.NumRoles {
			ru := st.Roles[r]
			if ru.Allocated.Peak > st.Total.Allocated.Peak || ru.Requested.Peak > st.Total.Requested.Peak {
				t.Fatalf("%s: role %s peaks %+v above the total's %+v", where, memory.Role(r), ru, st.Total)
			}
		}
		if s := m.Summary(); strings.Contains(s, "no role") {
			t.Fatalf("%s: summary shows blocks of no role:\n%s", where, s)
		}
	}
	// accounting is what a failed operation must leave unchanged.
	type accounting struct {
		roles        [memory.NumRoles]memory.RoleUsage
		tiers        [memory.NumTiers][2]memory.Stat // allocated, requested
		allocs       [memory.NumTiers][2]int64
		total        [2]memory.Stat
		spills, migr memory.Moved
	}
	snap := func() accounting {
		st := m.Stats()
		var a accounting
		a.roles = st.Roles
		for tr, u := range st.Tiers {
			a.tiers[tr] = [2]memory.Stat{u.Allocated, u.Requested}
			a.allocs[tr] = [2]int64{u.Allocs, u.Frees}
		}
		a.total = [2]memory.Stat{st.Total.Allocated, st.Total.Requested}
		a.spills, a.migr = st.Spills, st.Migrations
		return a
	}
	// held is what counts against tier tr's limit.
	var holds [memory.NumTiers]int64
	type holding struct {
		tier    memory.Tier
		n       int64
		release func()
	}
	var holdings []holding
	held := func(st memory.Stats, tr memory.Tier) int64 {
		h := st.Tiers[tr].Reserved.Current + holds[tr]
		if tr == memory.TierDevice {
			h += st.Tiers[memory.TierManaged].Reserved.Current
		}
		return h
	}
	checkLimits := func(step int, what string, before, after memory.Stats, managedGrowthOK bool) {
		t.Helper()
		for tr := range memory.NumTiers {
			l := limits[tr]
			if l == 0 {
				continue
			}
			grew := after.Tiers[tr].Reserved.Current > before.Tiers[tr].Reserved.Current
			if grew && held(after, memory.Tier(tr)) > l && !(memory.Tier(tr) == memory.TierDevice && managedGrowthOK) {
				t.Fatalf("step %d (%s): tier %s grew to hold %d (reserved %d) past its limit %d", step, what, memory.Tier(tr), held(after, memory.Tier(tr)), after.Tiers[tr].Reserved.Current, l)
			}
		}
	}
	// idle is the bytes tier tr maps in segments without a block in use.
	idle := func(tr memory.Tier) int64 {
		var n int64
		for _, ts := range m.Snapshot().Tiers {
			if ts.Tier != tr {
				continue
			}
			for _, seg := range ts.Segments {
				used := false
				for _, b := range seg.Blocks {
					used = used || b.Live || b.Pending
				}
				if !used {
					n += seg.Mapped
				}
			}
		}
		return n
	}
	// checkRoom checks that an allocation of size bytes that a limit
	// refused with err had no room even with the cache released.
	checkRoom := func(step int, what string, size int64, after memory.Stats, err error) {
		t.Helper()
		var oom *memory.OOMError
		if !errors.As(err, &oom) || oom.Cause != nil || faults || budget < 64<<20 {
			return
		}
		tr := oom.Tier
		need := memory.SegmentSize(memory.RoundSize(size))
		if mode == memory.SegmentsExpandable {
			need = (memory.RoundSize(size) + 2<<20 - 1) &^ (2<<20 - 1)
		}
		freed := idle(tr)
		if tr == memory.TierDevice {
			freed += idle(memory.TierManaged)
		}
		if room := limits[tr] - (held(after, tr) - freed); need <= room {
			t.Fatalf("step %d (%s): refused by the %s limit %d, though releasing the cache would leave %d for the %d it needs: %v", step, what, tr, limits[tr], room, need, err)
		}
	}
	checkErr := func(step int, what string, err error) {
		t.Helper()
		var oom *memory.OOMError
		switch {
		case errors.As(err, &oom):
			if !errors.Is(err, memory.ErrOutOfMemory) {
				t.Fatalf("step %d (%s): OOMError not ErrOutOfMemory: %v", step, what, err)
			}
			if !strings.Contains(err.Error(), "tried to allocate") {
				t.Fatalf("step %d (%s): OOM error names no size: %v", step, what, err)
			}
		case errors.Is(err, memory.ErrInvalidArgument):
		default:
			t.Fatalf("step %d (%s): undocumented error %v", step, what, err)
		}
	}

	for step := range 400 {
		if faults && rng.IntN(8) == 0 {
			fbs[rng.IntN(len(fbs))].FailAt(1+rng.IntN(3), 1+rng.IntN(2))
		}
		before := m.Stats()
		acc := snap()
		switch op := rng.IntN(22); {
		case op < 8:
			var size int64
			switch rng.IntN(3 + rng.IntN(2)) {
			case 0:
				size = 1 + rng.Int64N(8192)
			case 1:
				size = 1 + rng.Int64N(2<<20)
			case 2:
				size = 1 + rng.Int64N(20<<20)
			default:
				size = 1 + rng.Int64N(40<<20)
			}
			role := memory.Role(rng.IntN(int(memory.NumRoles)))
			s := memory.Stream(rng.IntN(2))
			what := fmt.Sprintf("alloc %d for %s on stream %d", size, role, s)
			a, err := m.AllocStream(size, role, s)
			after := m.Stats()
			if err != nil {
				checkErr(step, what, err)
				if got := snap(); got != acc {
					t.Fatalf("step %d (%s): failed alloc changed the accounting:\n%+v\n%+v", step, what, acc, got)
				}
				checkLimits(step, what, before, after, false)
				// Refused by a limit only where releasing the cache would
				// not have made room for the memory the request needs.
				checkRoom(step, what, size, after, err)
				for tr := range memory.NumTiers {
					if after.Tiers[tr].Reserved.Current > before.Tiers[tr].Reserved.Current {
						t.Fatalf("step %d (%s): failed, yet tier %s reserved grew from %d to %d: %v", step, what, memory.Tier(tr), before.Tiers[tr].Reserved.Current, after.Tiers[tr].Reserved.Current, err)
					}
				}
				check(step, what)
				continue
			}
			want := routeOf(role)
			if a.Tier() != want {
				if !(policy.Spill && want == memory.TierDevice && a.Tier() == memory.TierOffload) {
					t.Fatalf("step %d (%s): landed in %s, policy says %s", step, what, a.Tier(), want)
				}
				spills.Count++
				spills.Bytes += size
				// Spilled only where the device tier could not take it even
				// with its cache and the managed tier's released: the
				// limit has no room for the memory the request needs.
				if l := limits[memory.TierDevice]; l > 0 && budget > 64<<20 {
					need := memory.SegmentSize(memory.RoundSize(size))
					if mode == memory.SegmentsExpandable && !faults {
						need = (memory.RoundSize(size) + 2<<20 - 1) &^ (2<<20 - 1)
					}
					if room := l - (held(after, memory.TierDevice) - idle(memory.TierDevice) - idle(memory.TierManaged)); need <= room {
						t.Fatalf("step %d (%s): spilled, though releasing the cache would leave %d of the device limit %d for the %d it needs", step, what, room, l, need)
					}
				}
				if len(spillEvents) != 1 && spills.Count == 1 {
					t.Fatalf("step %d: first spill reported %d times", step, len(spillEvents))
				}
				if spills.Count == 1 {
					ev := spillEvents[0]
					if ev.Size != size || ev.Role != role || ev.From != memory.TierDevice || ev.To != memory.TierOffload || ev.Cause == nil {
						t.Fatalf("step %d: spill event %+v for %s", step, ev, what)
					}
				}
			}
			if a.Size() != size || a.Role() != role {
				t.Fatalf("step %d: allocation %d %s, want %d %s", step, a.Size(), a.Role(), size, role)
			}
			checkLimits(step, what, before, after, a.Tier() == memory.TierManaged)
			memtest.Fill(a.Host(), nextSeed)
			live = append(live, modelAlloc{a: a, size: size, role: role, tier: a.Tier(), seed: nextSeed})
			nextSeed++
			check(step, what)
		case op < 12:
			if len(live) == 0 {
				continue
			}
			i := rng.IntN(len(live))
			l := live[i]
			if err := m.Free(l.a); err != nil {
				t.Fatalf("step %d: free: %v", step, err)
			}
			if l.a.Host() != nil || l.a.Addr() != 0 {
				t.Fatalf("step %d: freed allocation still has bytes", step)
			}
			freed = append(freed, l.a)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			check(step, "free")
		case op == 12:
			if len(freed) == 0 {
				continue
			}
			a := freed[rng.IntN(len(freed))]
			for _, err := range []error{m.Free(a), a.Free(), m.Migrate(a, memory.TierHost)} {
				if !errors.Is(err, memory.ErrDoubleFree) {
					t.Fatalf("step %d: use after free: %v", step, err)
				}
			}
			if got := snap(); got != acc {
				t.Fatalf("step %d: double free changed the accounting", step)
			}
			check(step, "double free")
		case op < 15:
			if len(live) == 0 {
				continue
			}
			i := rng.IntN(len(live))
			to := memory.Tier(rng.IntN(int(memory.NumTiers)))
			what := fmt.Sprintf("migrate %d for %s from %s to %s", live[i].size, live[i].role, live[i].tier, to)
			err := m.Migrate(live[i].a, to)
			after := m.Stats()
			if err != nil {
				checkErr(step, what, err)
				checkRoom(step, what, live[i].size, after, err)
				if got := snap(); got.roles != acc.roles || got.tiers != acc.tiers || got.total != acc.total || got.spills != acc.spills || got.migr != acc.migr {
					t.Fatalf("step %d (%s): failed migrate changed the accounting:\n%+v\n%+v", step, what, acc, got)
				}
			} else {
				if live[i].a.Tier() != to {
					t.Fatalf("step %d (%s): in %s", step, what, live[i].a.Tier())
				}
				if to != live[i].tier && after.Migrations.Count != before.Migrations.Count+1 {
					t.Fatalf("step %d (%s): migrations %d -> %d", step, what, before.Migrations.Count, after.Migrations.Count)
				}
				live[i].tier = to
			}
			checkLimits(step, what, before, after, to == memory.TierManaged)
			check(step, what)
		case op == 15:
			tr := memory.Tier(rng.IntN(int(memory.NumTiers)))
			l := limitChoices[rng.IntN(len(limitChoices))]
			what := fmt.Sprintf("SetLimit(%s, %d)", tr, l)
			if err := m.SetLimit(tr, l); err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			limits[tr] = l
			after := m.Stats()
			if got := snap(); got != acc {
				t.Fatalf("step %d (%s): changed the accounting", step, what)
			}
			for u := range memory.NumTiers {
				if after.Tiers[u].Reserved.Current > before.Tiers[u].Reserved.Current {
					t.Fatalf("step %d (%s): tier %s reserved grew", step, what, memory.Tier(u))
				}
			}
			// Lowered below what the tier holds, its cache goes, and the
			// managed tier's while the device limit has no room yet.
			if l > 0 && held(before, tr) > l {
				if n := idle(tr); n > 0 {
					t.Fatalf("step %d (%s): %d bytes of %s cached in segments without a block in use", step, what, n, tr)
				}
				if tr == memory.TierDevice && held(m.Stats(), tr) > l {
					if n := idle(memory.TierManaged); n > 0 {
						t.Fatalf("step %d (%s): %d bytes of managed cached in segments without a block in use", step, what, n)
					}
				}
			}
			check(step, what)
		case op == 16:
			if err := m.EmptyCache(); err != nil {
				t.Fatalf("step %d: EmptyCache: %v", step, err)
			}
			if got := snap(); got != acc {
				t.Fatalf("step %d: EmptyCache changed the accounting", step)
			}
			// Every fully free segment went back: a tier with nothing live
			// nor pending holds nothing, and every classic segment left
			// holds a live or pending block.
			st := m.Stats()
			for tr, u := range st.Tiers {
				if u.Active.Current == 0 && u.Reserved.Current != 0 {
					t.Fatalf("step %d: EmptyCache left %d reserved in %s with nothing active", step, u.Reserved.Current, memory.Tier(tr))
				}
			}
			for _, ts := range m.Snapshot().Tiers {
				for _, seg := range ts.Segments {
					used := false
					for _, b := range seg.Blocks {
						used = used || b.Live || b.Pending
					}
					if !used && seg.Mapped > 0 {
						t.Fatalf("step %d: EmptyCache left a segment of %s with %d bytes mapped and no block in use", step, ts.Tier, seg.Mapped)
					}
				}
			}
			check(step, "EmptyCache")
		case op == 17:
			switch rng.IntN(3) {
			case 0:
				policy = memory.HybridPolicy()
			case 1:
				policy = memory.SingleTierPolicy(memory.Tier(rng.IntN(int(memory.NumTiers))))
			default:
				policy = memory.HybridPolicy()
				policy.Spill = false
			}
			m.SetPolicy(policy)
			check(step, "SetPolicy")
		case op == 18:
			m.ResetPeaks()
			st := m.Stats()
			for _, u := range append(st.Tiers[:], st.Total) {
				for _, x := range []memory.Stat{u.Allocated, u.Requested, u.Reserved, u.Active, u.InactiveSplit} {
					if x.Peak != x.Current {
						t.Fatalf("step %d: ResetPeaks left %+v", step, u)
					}
				}
			}
			for _, ru := range st.Roles {
				if ru.Allocated.Peak != ru.Allocated.Current || ru.Requested.Peak != ru.Requested.Current {
					t.Fatalf("step %d: ResetPeaks left %+v", step, ru)
				}
			}
			maxTotalAlloc, maxTotalReq = 0, 0
			check(step, "ResetPeaks")
		case op == 21 && rng.IntN(2) == 0:
			if len(holdings) > 0 && rng.IntN(2) == 0 {
				i := rng.IntN(len(holdings))
				h := holdings[i]
				h.release()
				h.release()
				holds[h.tier] -= h.n
				holdings = append(holdings[:i], holdings[i+1:]...)
				check(step, "release")
				continue
			}
			tr := memory.Tier(rng.IntN(int(memory.NumTiers)))
			n := 1 + rng.Int64N(6<<20)
			what := fmt.Sprintf("Hold(%s, %d)", tr, n)
			release, err := m.Hold(tr, n)
			if err != nil {
				if !errors.Is(err, memory.ErrOutOfMemory) {
					t.Fatalf("step %d (%s): %v", step, what, err)
				}
				if l := limits[tr]; l == 0 || held(m.Stats(), tr)+n <= l {
					t.Fatalf("step %d (%s): refused with room: %v", step, what, err)
				}
			} else {
				holds[tr] += n
				holdings = append(holdings, holding{tr, n, release})
				if l := limits[tr]; l > 0 && held(m.Stats(), tr) > l {
					t.Fatalf("step %d (%s): held %d past the limit %d", step, what, held(m.Stats(), tr), l)
				}
			}
			if got := snap(); got != acc {
				t.Fatalf("step %d (%s): changed the accounting", step, what)
			}
			check(step, what)
		case op == 19 && rng.IntN(3) == 0:
			if len(live) == 0 {
				continue
			}
			i := rng.IntN(len(live))
			to := memory.Tier(rng.IntN(int(memory.NumTiers)))
			what := fmt.Sprintf("MigrateOn %d for %s from %s to %s", live[i].size, live[i].role, live[i].tier, to)
			err := m.MigrateOn(live[i].a, to, memory.Stream(rng.IntN(4)))
			after := m.Stats()
			if err != nil {
				checkErr(step, what, err)
				if got := snap(); got.roles != acc.roles || got.tiers != acc.tiers || got.total != acc.total {
					t.Fatalf("step %d (%s): failed MigrateOn changed the accounting", step, what)
				}
			} else {
				live[i].tier = to
			}
			checkLimits(step, what, before, after, to == memory.TierManaged)
			check(step, what)
		case op == 19 && rng.IntN(2) == 0:
			if sched == nil {
				var err error
				sched, err = m.NewScheduler(memory.SchedulerConfig{Budget: rng.Int64N(4) << 23, MinBytes: 4096, Patience: 1})
				if err != nil {
					t.Fatalf("step %d: NewScheduler: %v", step, err)
				}
				continue
			}
			for _, l := range live {
				if rng.IntN(2) == 0 {
					l.a.Touch()
				}
			}
			_, err := sched.Step()
			if err != nil {
				checkErr(step, "Step", err)
			}
			after := m.Stats()
			var moved memory.Moved
			for i := range live {
				if tr := live[i].a.Tier(); tr != live[i].tier {
					moved.Count++
					moved.Bytes += live[i].size
					live[i].tier = tr
				}
			}
			if got := (memory.Moved{Count: after.Migrations.Count - before.Migrations.Count, Bytes: after.Migrations.Bytes - before.Migrations.Bytes}); got != moved {
				t.Fatalf("step %d: Step moved %+v, Migrations grew by %+v", step, moved, got)
			}
			checkLimits(step, "Step", before, after, false)
			check(step, "Step")
		case op == 19:
			if err := m.EmptyStreamCache(memory.Stream(rng.IntN(2))); err != nil {
				t.Fatalf("step %d: EmptyStreamCache: %v", step, err)
			}
			check(step, "EmptyStreamCache")
		case op == 20 && rng.IntN(2) == 0:
			if len(live) > 0 && rng.IntN(2) == 0 {
				l := live[rng.IntN(len(live))]
				if err := m.RecordStream(l.a, memory.Stream(rng.IntN(4))); err != nil {
					t.Fatalf("step %d: RecordStream: %v", step, err)
				}
			} else if rng.IntN(2) == 0 {
				ss.Complete(memory.Stream(rng.IntN(4)))
			} else {
				ss.CompleteAll()
			}
			if got := snap(); got != acc {
				t.Fatalf("step %d: RecordStream or completion changed the accounting", step)
			}
			check(step, "streams")
		default:
			if len(live) == 0 {
				continue
			}
			l := live[rng.IntN(len(live))]
			got := l.a.Stream()
			if got > 3 {
				t.Fatalf("step %d: stream %d", step, got)
			}
		}
	}
	// Close with live allocations: a leak error per role; the accounting
	// back to zero; later calls fail with ErrClosed.
	err := m.Close()
	if len(live) > 0 {
		if !errors.Is(err, memory.ErrLeaked) {
			t.Fatalf("Close with %d live: %v", len(live), err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	checkAllZero(t, m, "after Close")
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	if used, _ := b.Used(); used != 0 {
		t.Fatalf("budget holds %d after Close", used)
	}
	for _, f := range fbs {
		if n, bytes := f.Live(); n != 0 {
			t.Fatalf("%s holds %d regions (%d bytes) after Close", f.Name(), n, bytes)
		}
	}
	for _, l := range live {
		if err := l.a.Free(); !errors.Is(err, memory.ErrClosed) {
			t.Fatalf("free after close: %v", err)
		}
	}
}
