//go:build amd64 && !race

package memory

import "sync/atomic"

// unlock is Unlock: with the mutex held and no waiter at the head, a
// plain store of 0 to the state releases it; else unlockSlow. It is Go,
// not assembly, so that it inlines into Unlock's callers (a call into
// assembly cost the pool's pair a call and the spills around it: about
// 1.5% of the mixed pair on a Xeon GPU host, 3% on the 2-core EPYC,
// bench/results/gpu-s50.md).
//
// The store is ordered after the critical section's memory accesses by
// the compiler and by the processor. The compiler keeps stores in program
// order (they form one memory chain) and schedules every load before the
// store that follows it in its block (cmd/compile/internal/ssa's schedule,
// "any load must come before the following store"); across blocks and
// calls the chain orders them. x86 keeps stores in order and never moves
// a store ahead of an earlier load (TSO), so another processor that sees
// the state 0 also sees everything written before it: a release. (Nor
// can the store be dropped or merged: dead-store elimination needs a
// later store to the state in the same block with no read between, and
// every other access to it is atomic.) The race detector must see the
// release, so race builds use the atomic store (mutex_unlock_other.go).
func unlock(m *mutex) {
	if atomic.LoadUint32(&m.state) == 0 || atomic.LoadUint32(&m.waiting) != 0 {
		unlockSlow(m)
		return
	}
	m.state = 0
}

// spinPause executes 30 PAUSE instructions (mutex_amd64.s).
func spinPause()
