//go:build !amd64 || race

package memory

import "sync/atomic"

// unlock is Unlock: an atomic store when the mutex is held and no waiter
// is at the head (which the race detector sees as a release, and which is
// a store-release instruction on arm64), else unlockSlow.
func unlock(m *mutex) {
	if atomic.LoadUint32(&m.state) == 0 || atomic.LoadUint32(&m.waiting) != 0 {
		unlockSlow(m)
		return
	}
	atomic.StoreUint32(&m.state, 0)
}

// spinPause is a spinning waiter's delay between reads of the state: a
// few loads here (amd64 pauses, mutex_amd64.s).
func spinPause() {
	var x uint32
	for range 30 {
		atomic.LoadUint32(&x)
	}
}
