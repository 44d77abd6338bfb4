package memory

import (
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

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
	held := 30 * time.Millisecond
	var released time.Time
	value := 0
	done := make(chan time.Duration)
	go func() {
		m.Lock()
		got := time.Since(released)
		require.Equal(t, 42, value)
		m.Unlock()
		done <- got
	}()
	time.Sleep(held)
	value = 42
	released = time.Now()
	m.Unlock()
	late := <-done
	require.Less(t, late, 500*time.Millisecond)
	t.Logf("woken %v after the release", late)
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

// mutex_amd64.s reads state and waiting at these offsets.
func TestMutexLayout(t *testing.T) {
	var m mutex
	require.Equal(t, uintptr(0), unsafe.Offsetof(m.state))
	require.Equal(t, uintptr(4), unsafe.Offsetof(m.waiting))
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
