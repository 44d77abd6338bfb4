//go:build amd64 && !race

package memory

// unlock is Unlock (mutex_amd64.s): a plain store when the mutex is held
// and no waiter is at the head, else unlockSlow.
//
//go:noescape
func unlock(m *mutex)

// spinPause executes 30 PAUSE instructions (mutex_amd64.s).
func spinPause()
