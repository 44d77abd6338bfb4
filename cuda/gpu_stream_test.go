package cuda

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGPUEventsTiming(t *testing.T) {
	c := gpuContext(t)
	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	start, err := c.NewEvent(EventDefault)
	require.NoError(t, err)
	defer start.Destroy()
	end, err := c.NewEvent(EventBlockingSync)
	require.NoError(t, err)
	defer end.Destroy()

	const n = 256 << 20
	buf, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(buf)
	require.NoError(t, start.Record(s))
	for i := range 10 {
		require.NoError(t, c.MemsetD32Async(buf, uint32(i), n/4, s))
	}
	require.NoError(t, end.Record(s))
	require.NoError(t, end.Synchronize())
	done, err := end.Query()
	require.NoError(t, err)
	assert.True(t, done)
	d, err := ElapsedTime(start, end)
	require.NoError(t, err)
	// 2.5 GiB of memset: at least ~0.3 ms at 8 TB/s, far below a second.
	assert.Greater(t, d, 100*time.Microsecond)
	assert.Less(t, d, time.Second)
	t.Logf("10 memsets of 256 MiB: %v (%.0f GB/s)", d, 10*n/d.Seconds()/1e9)

	nt, err := c.NewEvent(EventDisableTiming)
	require.NoError(t, err)
	require.NoError(t, nt.Record(s))
	_, err = ElapsedTime(start, nt)
	assert.ErrorIs(t, err, ErrInvalidValue)
	assert.ErrorContains(t, err, "EventDisableTiming")
	require.NoError(t, nt.Destroy())
	require.NoError(t, nt.Destroy(), "idempotent")
	assert.ErrorContains(t, nt.Record(s), "was destroyed")
}

// A stream waiting on another's event sees that stream's writes.
func TestGPUStreamWaitEvent(t *testing.T) {
	c := gpuContext(t)
	producer, err := c.NewStream()
	require.NoError(t, err)
	defer producer.Destroy()
	consumer, err := c.NewStream()
	require.NoError(t, err)
	defer consumer.Destroy()
	ready, err := c.NewEvent(EventDisableTiming)
	require.NoError(t, err)
	defer ready.Destroy()

	const n = 64 << 20
	src, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(src)
	dst, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(dst)
	require.NoError(t, c.MemsetD32(dst, 0, n/4))

	for round := uint32(1); round <= 3; round++ {
		// Several large memsets make the producer slow enough that the
		// consumer would copy stale data without the wait.
		for range 4 {
			require.NoError(t, c.MemsetD32Async(src, 0, n/4, producer))
		}
		require.NoError(t, c.MemsetD32Async(src, round, n/4, producer))
		require.NoError(t, ready.Record(producer))
		require.NoError(t, consumer.WaitEvent(ready))
		require.NoError(t, c.MemcpyDtoDAsync(dst, src, n, consumer))
		require.NoError(t, consumer.Synchronize())
		got := make([]byte, n)
		require.NoError(t, c.MemcpyDtoH(got, dst))
		for _, off := range []int{0, n / 2, n - 4} {
			assert.Equal(t, round, binary.LittleEndian.Uint32(got[off:]), "round %d offset %d", round, off)
		}
	}
	require.NoError(t, producer.Synchronize())
}
