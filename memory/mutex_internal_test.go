package memory

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Goroutines that each increment a plain counter under the mutex, some
// holding it across a sleep (a driver call's length), lose no increment.
func TestMutexExcludes(t *testing.T) {
	for _, m := range map[string]*mutex{"initialised": newMutex(), "zero value": new(mutex)} {
		const goroutines, each = 8, 5000
		var count int
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					m.Lock()
					if g == 0 && i%1000 == 0 {
						time.Sleep(200 * time.Microsecond)
					}
					count++
					m.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, goroutines*each, count)
		require.Zero(t, m.state)
		require.Zero(t, m.waiting)
	}
}

// A goroutine that takes the mutex now and then still gets it while
// another holds it nearly all the time, releasing it for an instant between
// holds of 20 µs (a woken waiter comes too late to find it free): after
// starveAfter the next Unlock hands it over.
func TestMutexWaiterNotStarved(t *testing.T) {
	m := newMutex()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var holds, mine int
	started := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.Lock()
			if holds++; holds == 1 {
				close(started)
			}
			for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
			}
			m.Unlock()
		}
	})
	<-started
	start := time.Now()
	for range 20 {
		m.Lock()
		mine++
		m.Unlock()
	}
	took := time.Since(start)
	close(stop)
	wg.Wait()
	require.Equal(t, 20, mine)
	// Each acquisition within about starveAfter plus a sleep of at most
	// mutexMaxSleep; generous for a loaded 2-core machine.
	require.Less(t, took, 5*time.Second, "the waiter took %v for 20 acquisitions against a holder", took)
	t.Logf("20 acquisitions against a holder (%d holds): %v", holds, took)
}

// A waiter behind a long hold gets the mutex soon after its release, and
// the holder's writes are visible to it.
func TestMutexWaiterWakes(t *testing.T) {
	m := newMutex()
	m.Lock()
	var released time.Time
	value := 0
	type seen struct {
		late  time.Duration
		value int
	}
	done := make(chan seen)
	go func() {
		m.Lock()
		got := seen{time.Since(released), value}
		m.Unlock()
		done <- got
	}()
	time.Sleep(30 * time.Millisecond)
	value = 42
	released = time.Now()
	m.Unlock()
	got := <-done
	require.Equal(t, 42, got.value)
	require.Less(t, got.late, 500*time.Millisecond)
	t.Logf("woken %v after the release", got.late)
}

// unlockSlow with a waiter at the head: a release and a wake, or, when the
// head starves, a hand-off (the state stays 1: nobody else can take it) and
// a wake; with a wake already pending, or no channel at all (the zero
// value), the hand-off still happens.
func TestMutexUnlockSlow(t *testing.T) {
	for _, tc := range []struct {
		name               string
		m                  *mutex
		pending, starving  bool
		wantState          uint32
		wantHandoff, woken bool
	}{
		{"release", newMutex(), false, false, 0, false, true},
		{"hand-off", newMutex(), false, true, 1, true, true},
		{"hand-off, a wake pending", newMutex(), true, true, 1, true, true},
		{"release, a wake pending", newMutex(), true, false, 0, false, true},
		{"hand-off, zero value", new(mutex), false, true, 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			m.Lock()
			m.waiting = 1 // as a head waiter would
			m.starving.Store(tc.starving)
			if tc.pending {
				m.wake <- struct{}{}
			}
			m.Unlock()
			require.Equal(t, tc.wantState, m.state)
			require.Equal(t, tc.wantHandoff, m.handoff.Load())
			woken := false
			select {
			case <-m.wake: // a nil channel never is
				woken = true
			default:
			}
			require.Equal(t, tc.woken, woken)
		})
	}
}

// A head waiter that starves is handed the mutex: right after the
// holder's Unlock the state is still held (a new arrival's compare-and-swap
// fails), and the waiter then has it.
func TestMutexHandsOffToStarvingWaiter(t *testing.T) {
	for _, m := range []*mutex{newMutex(), new(mutex)} {
		m.Lock()
		got := make(chan struct{})
		go func() {
			m.Lock()
			close(got)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !m.starving.Load() {
			require.True(t, time.Now().Before(deadline), "the waiter never starved")
			time.Sleep(100 * time.Microsecond)
		}
		m.Unlock()
		require.False(t, atomic.CompareAndSwapUint32(&m.state, 0, 1), "the state was released, not handed over")
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("the starving waiter never got the mutex")
		}
		require.False(t, m.handoff.Load())
		require.False(t, m.starving.Load())
		require.Zero(t, m.waiting)
		m.Unlock()
		require.Zero(t, m.state)
	}
}

func TestMutexUnlockOfUnlockedPanics(t *testing.T) {
	m := newMutex()
	require.PanicsWithValue(t, "memory: unlock of an unlocked mutex", m.Unlock)
	m.Lock()
	require.Equal(t, uint32(1), m.state)
	m.Unlock()
	require.Panics(t, m.Unlock)
}

// The uncontended Lock and Unlock, against sync.Mutex's.
func BenchmarkMutex(b *testing.B) {
	var x [64]int
	b.Run("pool", func(b *testing.B) {
		m := newMutex()
		for i := 0; b.Loop(); i++ {
			m.Lock()
			x[i&63]++
			m.Unlock()
		}
	})
	b.Run("sync", func(b *testing.B) {
		var m sync.Mutex
		for i := 0; b.Loop(); i++ {
			m.Lock()
			x[i&63]++
			m.Unlock()
		}
	})
}

// Contended: GOMAXPROCS goroutines taking the lock for a short critical
// section each, against sync.Mutex's. "spread" is the most acquisitions
// of one goroutine over the fewest of another (1: fair).
func BenchmarkMutexContended(b *testing.B) {
	run := func(b *testing.B, m sync.Locker) {
		var n int
		var mu sync.Mutex
		var counts []int
		b.RunParallel(func(pb *testing.PB) {
			mine := 0
			for pb.Next() {
				m.Lock()
				n++
				m.Unlock()
				mine++
			}
			mu.Lock()
			counts = append(counts, mine)
			mu.Unlock()
		})
		if len(counts) > 1 {
			b.ReportMetric(float64(slices.Max(counts))/float64(max(slices.Min(counts), 1)), "spread")
		}
	}
	b.Run("pool", func(b *testing.B) { run(b, newMutex()) })
	b.Run("sync", func(b *testing.B) { run(b, new(sync.Mutex)) })
}
