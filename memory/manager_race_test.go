package memory_test

import (
	"sync"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestManagerReadersConcurrent: statistics, summaries, snapshots,
// segments and histories read while two goroutines allocate (one of them
// staging memory), free, record streams, empty the cache and change the
// limit (run with -race).
func TestManagerReadersConcurrent(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		ss := memtest.NewStreamSync()
		m := memory.NewHostManager(memory.Config{Segments: mode, StreamSync: ss})
		m.RecordHistory(256)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var live []*memory.Allocation
				for i := range 400 {
					role := memory.RoleActivation
					if g == 1 {
						role = memory.RoleStaging
					}
					a, err := m.AllocStream(int64(1+(i*7919)%(3<<20)), role, memory.Stream(g))
					if err != nil {
						t.Error(err)
						return
					}
					if i%3 == 0 {
						_ = m.RecordStream(a, 9)
					}
					live = append(live, a)
					if len(live) > 6 {
						if err := live[0].Free(); err != nil {
							t.Error(err)
							return
						}
						live = live[1:]
					}
					if i%50 == 0 {
						ss.CompleteAll()
						_ = m.EmptyCache()
						_ = m.SetLimit(memory.TierDevice, int64(64+i%64)<<20)
					}
				}
				for _, a := range live {
					_ = a.Free()
				}
			}()
		}
		var rg sync.WaitGroup
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = m.Stats()
				_ = m.Summary()
				_ = m.Snapshot()
				_ = m.History()
				_ = m.Limit(memory.TierDevice)
				_ = m.Pool(memory.TierDevice).Segments()
				_ = m.Pool(memory.TierDevice).Stats()
				_ = m.Pool(memory.TierStaging).History()
				m.MarkHistory("r")
				m.ResetPeaks()
			}
		}()
		wg.Wait()
		close(stop)
		rg.Wait()
		ss.CompleteAll()
		_ = m.Close()
	}
}

// TestManagerCloseConcurrent: Close racing with allocations, frees,
// migrations, holds, limit changes, scheduler steps and readers: every
// call either works or fails with an error (run with -race).
func TestManagerCloseConcurrent(t *testing.T) {
	for rep := range 20 {
		ss := memtest.NewStreamSync()
		mode := memory.SegmentsClassic
		if rep%2 == 1 {
			mode = memory.SegmentsExpandable
		}
		m := memory.NewHostManager(memory.Config{Segments: mode, StreamSync: ss, Limits: [memory.NumTiers]int64{memory.TierDevice: 64 << 20}})
		m.RecordHistory(64)
		s, _ := m.NewScheduler(memory.SchedulerConfig{Budget: 32 << 20, MinBytes: 1})
		m.OnAlloc(func(a *memory.Allocation) { _ = a.Stream() })
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rel []func()
				for i := range 300 {
					a, err := m.AllocStream(int64(1+(i*7919+g)%(5<<20)), memory.Role(i%int(memory.NumRoles)), memory.Stream(g%2))
					if err != nil {
						continue
					}
					_ = m.RecordStream(a, 5)
					_ = m.Migrate(a, memory.TierOffload)
					_ = m.MigrateOn(a, memory.TierDevice, 3)
					if r, err := m.Hold(memory.TierDevice, 1<<20); err == nil {
						rel = append(rel, r)
					}
					_ = a.Free()
					_ = m.EmptyStreamCache(memory.Stream(g))
					_ = m.SetLimit(memory.TierDevice, int64(40+i%40)<<20)
				}
				for _, r := range rel {
					r()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				_ = m.Stats()
				_ = m.Summary()
				_ = m.Snapshot()
				_ = m.History()
				_, _ = s.Step()
				ss.CompleteAll()
				_ = m.EmptyCache()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 + rep {
				_ = m.Stats()
			}
			_ = m.Close()
		}()
		wg.Wait()
		_ = m.Summary()
	}
}
