package memory_test

import (
	"sync"
	"testing"

	"github.com/strata-ml/strata/memory"
)

// TestHostBudgetTakesOtherTiersCache: on the CPU device every tier draws
// on one HostBudget. Bytes another tier merely caches (fully free
// segments, free pages) should not make an allocation fail with an
// out-of-memory error: EmptyCache would give them back.
func TestHostBudgetTakesOtherTiersCache(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		b := memory.NewHostBudget(64<<20, "test")
		m := memory.NewBudgetHostManager(memory.Config{Segments: mode, Policy: memory.SingleTierPolicy(memory.TierDevice)}, b)
		a, err := m.Alloc(40<<20, memory.RoleActivation) // device tier
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(); err != nil { // cached by the device tier
			t.Fatal(err)
		}
		// The managed tier now needs the bytes the device tier caches.
		m.SetPolicy(memory.SingleTierPolicy(memory.TierManaged))
		e, err := m.Alloc(40<<20, memory.RoleEmbedding)
		if err != nil {
			used, _ := b.Used()
			t.Errorf("mode %d: 40 MiB of a 64 MiB budget with nothing live failed (budget used %d, device tier reserves %d): %v",
				mode, used, m.Stats().Tiers[memory.TierDevice].Reserved.Current, err)
		} else {
			_ = e.Free()
		}
		m.Close()
	}
}

// TestHostBudgetPeersConcurrent: two goroutines take turns to
// allocate in two tiers that share a budget, each needing the bytes the
// other tier caches, while a third reads the statistics and empties the
// cache (run with -race): nothing fails, and everything is given back.
func TestHostBudgetPeersConcurrent(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		b := memory.NewHostBudget(40<<20, "test")
		m := memory.NewBudgetHostManager(memory.Config{Segments: mode}, b)
		var wg sync.WaitGroup
		turn := [2]chan bool{make(chan bool, 1), make(chan bool, 1)}
		turn[0] <- true
		stop := make(chan struct{})
		for g, role := range []memory.Role{memory.RoleActivation, memory.RoleEmbedding} { // device, managed
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					<-turn[g]
					a, err := m.Alloc(int64(24+(i*5+g)%12)<<20, role)
					if err == nil {
						err = a.Free()
					}
					turn[1-g] <- true
					if err != nil {
						t.Errorf("goroutine %d, allocation %d: %v", g, i, err)
					}
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
				_ = m.Snapshot()
				if b.Limit() < 0 {
					return
				}
			}
		}()
		wg.Wait()
		<-turn[0]
		close(stop)
		rg.Wait()
		if err := m.EmptyCache(); err != nil {
			t.Fatal(err)
		}
		if used, _ := b.Used(); used != 0 {
			t.Errorf("budget holds %d", used)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
