package memtest

import (
	"runtime"
	"time"
)

// Settled returns m's bytes in use once unreferenced, unreleased buffers
// are gone: packages above memory free forgotten tensors from garbage
// collector cleanups, at any moment, so a test's baseline taken before
// they ran could be undercut by a free during the test and fail an exact
// comparison. It collects until two readings agree (at most 20 rounds).
func Settled(m interface{ InUse() int64 }) int64 {
	prev := int64(-1)
	for range 20 {
		runtime.GC()
		time.Sleep(2 * time.Millisecond) // cleanups run on their own goroutine
		v := m.InUse()
		if v == prev {
			break
		}
		prev = v
	}
	return prev
}
