package memory_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// blockingOnlySync is a memtest.StreamSync that cannot tell without
// blocking whether work has finished: Done always reports false, as the
// StreamSync contract allows when the answer cannot be had, and only Wait
// says an event is done. It is no StreamWaiter, so a pool at its limit
// waits on the host.
type blockingOnlySync struct{ f *memtest.StreamSync }

func (w blockingOnlySync) RecordEvent(s memory.Stream) (memory.StreamEvent, error) {
	return w.f.RecordEvent(s)
}
func (w blockingOnlySync) Done(memory.StreamEvent) bool     { return false }
func (w blockingOnlySync) Wait(ev memory.StreamEvent) error { return w.f.Wait(ev) }
func (w blockingOnlySync) Release(ev memory.StreamEvent)    { w.f.Release(ev) }

// TestPoolWaitForWithoutDone: a pool at its limit waits on the host for
// the block pending on another stream's work and reuses it once Wait
// says the work is done, even when Done never says so. Before, waitFor
// waited and then asked Done whether the event it had just waited for
// was done; Done said no, the block stayed pending, and the allocation
// waited again for ever.
func TestPoolWaitForWithoutDone(t *testing.T) {
	for _, seg := range []bool{false, true} {
		ss := memtest.NewStreamSync()
		var b memory.Backend = memtest.NewAddressBackend(memory.TierDevice, 1<<40)
		if seg {
			b = memory.NewHostBackend(memory.TierDevice) // virtual memory
		}
		p := memory.NewPool(b, memory.PoolConfig{Limit: 2 * MiB, StreamSync: blockingOnlySync{ss}, Expandable: seg})
		a := mustAlloc(t, p, MiB, 1)
		other := mustAlloc(t, p, MiB, 1)
		require.NoError(t, p.RecordStream(a, 2))
		require.NoError(t, p.Free(a))

		done := make(chan error, 1)
		var c *memory.Block
		go func() {
			var err error
			c, err = p.Alloc(MiB, 1)
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err, "expandable %v", seg)
		case <-time.After(10 * time.Second):
			t.Fatalf("expandable %v: the allocation still waits for the block pending on stream 2 after 10 s", seg)
		}
		assert.Equal(t, 1, ss.Calls().Waits, "expandable %v", seg)
		require.NoError(t, p.Free(other))
		require.NoError(t, p.Free(c))
		require.NoError(t, p.Close())
		require.NoError(t, ss.Err(), "StreamSync protocol")
		require.Zero(t, ss.Outstanding(), "event tokens not released")
	}
}
