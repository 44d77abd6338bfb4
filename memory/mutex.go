package memory

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// mutex is the lock of a pool, and of a manager with its pools. Its
// uncontended Lock and Unlock cost one atomic instruction between them,
// where sync.Mutex's cost two: Lock swaps the state from 0 to 1 by a
// compare-and-swap; Unlock, finding no waiter, stores 0 back with a plain
// store (an ordinary MOV on amd64, inlined into the caller; why that is a
// release there is in mutex_unlock_amd64.go; elsewhere, and under the
// race detector, which must see the release, atomic.StoreUint32,
// mutex_unlock_other.go). On the H200 machine's host a Lock and Unlock
// cost 15 ns against sync.Mutex's 19.5 (3.2 against 4.6 on a 2-core EPYC),
// and a pool's allocation and free take the lock twice.
//
// Contention is rare (one goroutine drives a device's training; others
// upload or read statistics), but a critical section can last long (a
// driver call that reserves or maps memory, or one that waits for a
// stream), so waiters sleep rather than spin for long: after four reads
// of the state, each after 30 PAUSE instructions (as sync.Mutex spins;
// reading it in a tight loop instead took the line from the holder and
// made two goroutines' contended pairs 3x slower on the H200's host),
// they queue on a sync.Mutex. The one at its head retries the state, after
// a few yields sleeping until Unlock wakes it (wake) or a timer fires. The
// timer is needed: Unlock's read of waiting is not ordered after its store
// (that would take the atomic instruction this lock saves), so a wake is
// missed when the head arrives in the few nanoseconds before the store is
// seen; it then retries after its timer, 20 µs at first, doubling to 1 ms.
// A head that has waited starveAfter is handed the lock by the next Unlock
// (handoff set, the state left at 1) instead of racing new arrivals for
// it, as sync.Mutex's starvation mode does. The zero value works (without
// a wake channel the head notices releases and hand-offs by its timer
// alone); init makes the channel.
type mutex struct {
	// state is 1 while held; waiting is 1 while a waiter is at the head of
	// the queue. Both are used only through sync/atomic, but for Unlock's
	// plain store of state on amd64 (mutex_unlock_amd64.go).
	state, waiting uint32
	// starving is set by the head waiter after starveAfter; handoff by
	// the Unlock that then hands it the lock, the state staying 1.
	starving, handoff atomic.Bool
	// wake carries Unlock's news to the head waiter: the lock was released
	// or handed over (handoff says which). A hint: the head checks the
	// state and handoff after each wake and each timer.
	wake  chan struct{}
	queue sync.Mutex // waiters line up here; the one holding it waits on state
}

const (
	mutexSpins      = 4 // paused reads of the state before a waiter queues
	mutexYields     = 4 // retries with a yield before the head waiter sleeps
	mutexFirstSleep = 20 * time.Microsecond
	mutexMaxSleep   = time.Millisecond
	starveAfter     = time.Millisecond
)

// multicore: spinning may see another processor release the lock. (Read
// once: runtime.GOMAXPROCS takes the scheduler's lock.)
var multicore = runtime.NumCPU() > 1

// init makes the wake channel; call it before the mutex is shared.
func (m *mutex) init() { m.wake = make(chan struct{}, 1) }

// newMutex returns an initialised mutex.
func newMutex() *mutex {
	m := new(mutex)
	m.init()
	return m
}

// Lock takes the mutex, waiting while another goroutine holds it.
func (m *mutex) Lock() {
	if atomic.CompareAndSwapUint32(&m.state, 0, 1) {
		return
	}
	m.lockSlow()
}

// Unlock releases the mutex. It panics when the mutex is not held, as
// sync.Mutex does.
func (m *mutex) Unlock() { unlock(m) }

// lockSlow waits for the state: spinning briefly first when another
// processor may be releasing it (a pool's critical section is about as
// long as the spin), then in the queue and at its head.
func (m *mutex) lockSlow() {
	if multicore {
		for range mutexSpins {
			spinPause() // keeps off the state's cache line a while
			if atomic.LoadUint32(&m.state) == 0 && atomic.CompareAndSwapUint32(&m.state, 0, 1) {
				return
			}
		}
	}
	m.queue.Lock()
	atomic.StoreUint32(&m.waiting, 1)
	start := time.Now()
	sleep := mutexFirstSleep
	var timer *time.Timer
	for try := 0; ; try++ {
		if m.handoff.Load() { // the state is 1, held for this waiter
			m.handoff.Store(false)
			break
		}
		if atomic.LoadUint32(&m.state) == 0 && atomic.CompareAndSwapUint32(&m.state, 0, 1) {
			break
		}
		if try < mutexYields {
			runtime.Gosched()
			continue
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-m.wake:
		case <-timer.C:
			sleep = min(2*sleep, mutexMaxSleep)
		}
		if time.Since(start) >= starveAfter {
			m.starving.Store(true)
		}
	}
	if timer != nil {
		timer.Stop()
	}
	// A wake may be left over (the state was taken before it was read);
	// the next head would only retry for it.
	select {
	case <-m.wake:
	default:
	}
	m.starving.Store(false)
	atomic.StoreUint32(&m.waiting, 0)
	m.queue.Unlock()
}

// unlockSlow is Unlock when the mutex is not held (it panics) or a waiter
// is at the head of the queue: it hands the mutex to the head when the
// head starves (handoff set, the state staying 1: no new arrival can take
// it), else releases it; then it wakes the head. starving is only set
// while the head waits without the lock, so a hand-off always reaches it.
func unlockSlow(m *mutex) {
	if atomic.LoadUint32(&m.state) == 0 {
		panic("memory: unlock of an unlocked mutex")
	}
	if m.starving.Load() {
		m.handoff.Store(true)
	} else {
		atomic.StoreUint32(&m.state, 0)
	}
	select {
	case m.wake <- struct{}{}:
	default: // a wake is pending already (or no channel: the timer)
	}
}
