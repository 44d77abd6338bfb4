package memory

import (
	"errors"
	"sync/atomic"
)

// ErrInjected is the cause of an allocation failure that a test asked for
// (Manager.FailAllocation); errors.Is sees ErrOutOfMemory too.
var ErrInjected = errors.New("injected failure")

// Fault injection. Tests of the layers above (a training step, say) need
// every allocation point to fail once, to see that each failure comes
// back as an error naming the op, that the bytes in use return to their
// level, and that the next step succeeds. A failing backend
// (memtest.FaultBackend) reaches only the allocations that miss the
// pool's cache; FailAllocation reaches every one: the manager counts its
// allocations and fails the chosen one with an *OOMError whose cause is
// ErrInjected, as if the pool had run out after releasing its cache. One
// manager at a time can be armed; when none is, an allocation pays one
// atomic load.

// faultPlan is an armed FailAllocation: the manager, and how many
// allocations are left before the one that fails. left is read and
// written with the manager's mutex held.
type faultPlan struct {
	m    *Manager
	left int64
	hit  atomic.Int64 // failures injected
}

var armedFault atomic.Pointer[faultPlan]

// FailAllocation makes the n-th allocation of m from now (1: the next)
// fail with an *OOMError wrapping ErrOutOfMemory and ErrInjected; 0
// disarms. Arming m disarms any other manager. It returns how many
// failures the previous plan of m injected.
func (m *Manager) FailAllocation(n int64) (injected int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := armedFault.Load()
	mine := old != nil && old.m == m
	if mine {
		injected = old.hit.Load()
	}
	if n <= 0 {
		if mine {
			// Only m's plan: another manager may have armed since the load.
			armedFault.CompareAndSwap(old, nil)
		}
		return injected
	}
	armedFault.Store(&faultPlan{m: m, left: n})
	return injected
}

// injectedFault is called by alloc, with m.mu held, when a plan is armed:
// it counts the allocation and returns the failure when its turn comes.
func (m *Manager) injectedFault(size int64, t Tier) error {
	f := armedFault.Load()
	if f == nil || f.m != m || f.left <= 0 {
		return nil
	}
	if f.left--; f.left > 0 {
		return nil
	}
	f.hit.Add(1)
	e := m.pools[t].oomError(size, ErrInjected)
	return e
}
