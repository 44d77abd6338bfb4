package nccl

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ncclCommInitRank and ncclCommInitAll take C ints: a rank count or a
// device ordinal past math.MaxInt32 is refused, not truncated (2^32+2
// ranks would reach NCCL as 2, device 2^32 as device 0, past the check
// for duplicates).
func TestInitRefusesValuesPastCInt(t *testing.T) {
	id := UniqueID{1}
	_, err := CommInitRank(1<<32+2, id, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "nccl: CommInitRank: 4294967298 ranks: more than NCCL's limit of 2147483647")
	_, err = CommInitRank(math.MaxInt32+1, id, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)

	_, err = CommInitAll([]int{0, 1 << 32})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "nccl: CommInitAll: device ordinal 4294967296 does not fit a C int")
}

// The same, through the fake library: nothing reaches NCCL.
func TestFakeInitRefusesValuesPastCInt(t *testing.T) {
	f := useFakeNCCL(t)
	calls := f.calls
	_, err := CommInitRank(1<<32+2, UniqueID{9}, 1)
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = CommInitAll([]int{0, 1 << 32})
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Equal(t, calls, f.calls, "NCCL was not called")
}

// A communicator's methods may be called from any goroutine: Destroy
// racing a collective, AsyncError or Abort is no data race (run with
// -race), and the communicator is freed once.
func TestFakeDestroyConcurrentWithCalls(t *testing.T) {
	f := useFakeNCCL(t)
	defer func() { f.freedTwice = 0 }()
	for range 100 {
		c, err := CommInitRank(2, UniqueID{9}, 1)
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Go(func() { _ = c.AllReduce(1, 1, 4, Float32, Sum, nil) })
		wg.Go(func() { _ = c.AsyncError() })
		wg.Go(func() { _ = c.Destroy() })
		wg.Go(func() { _ = c.Abort() })
		wg.Wait()
	}
	assert.Zero(t, f.freedTwice, "communicators freed twice")
}

// AsyncError checks the communicator under its lock: one destroyed while
// AsyncError waited for the lock is refused, not handed to NCCL.
func TestFakeAsyncErrorAfterDestroyWhileWaiting(t *testing.T) {
	f := useFakeNCCL(t)
	c, err := CommInitRank(2, UniqueID{9}, 1)
	require.NoError(t, err)
	c.mu.Lock() // a call in progress, e.g. Destroy
	done := make(chan error)
	go func() { done <- c.AsyncError() }()
	time.Sleep(50 * time.Millisecond) // AsyncError has passed its checks and waits
	// What Destroy does under the lock.
	require.Equal(t, Success, Result(ccall(c.lib.commDestroy.addr, c.h)))
	c.destroyed = true
	f.nextResult = int32(RemoteError) // what the fake would report if called
	c.mu.Unlock()
	err = <-done
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "was destroyed")
	f.nextResult = 0
}

// Abort while Destroy is inside ncclCommDestroy (holding the lock) does
// not free the communicator a second time with ncclCommAbort.
func TestFakeAbortDuringDestroy(t *testing.T) {
	f := useFakeNCCL(t)
	f.destroyUsleep = 100_000
	defer func() { f.destroyUsleep, f.freedTwice = 0, 0 }()
	c, err := CommInitRank(2, UniqueID{9}, 1)
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- c.Destroy() }()
	time.Sleep(30 * time.Millisecond) // Destroy is in ncclCommDestroy
	require.NoError(t, c.Abort())
	require.NoError(t, <-done)
	assert.Zero(t, f.freedTwice, "the communicator was freed twice")
	require.NoError(t, c.Destroy())
	require.NoError(t, c.Abort())
	assert.Zero(t, f.freedTwice)
}

// An Abort whose ncclCommAbort fails leaves the communicator unfreed: a
// later Destroy frees it (with ncclCommAbort, not waiting for its work)
// instead of taking it for freed and leaking it.
func TestFakeDestroyAfterFailedAbort(t *testing.T) {
	f := useFakeNCCL(t)
	defer func() { f.freedTwice = 0 }()
	c, err := CommInitRank(2, UniqueID{9}, 1)
	require.NoError(t, err)
	f.nextResult = int32(InternalError)
	require.ErrorContains(t, c.Abort(), "ncclCommAbort")
	assert.True(t, c.Aborted())
	calls := f.calls
	require.NoError(t, c.Destroy())
	assert.Equal(t, calls+1, f.calls, "Destroy freed the communicator")
	assert.Equal(t, "ncclCommAbort", f.lastOp())
	require.NoError(t, c.Destroy(), "a second Destroy is a no-op")
	require.NoError(t, c.Abort())
	assert.Equal(t, calls+1, f.calls)
	assert.Zero(t, f.freedTwice)
}

// Abort while a collective holds the lock and has passed its checks but
// not yet called NCCL: the collective returns the abort's error and does
// not hand NCCL the communicator Abort freed.
func TestFakeAbortBeforeCollectiveEntersNCCL(t *testing.T) {
	f := useFakeNCCL(t)
	defer func() { f.usedFreed = 0 }()
	for _, call := range []struct {
		name string
		fn   func(c *Comm) error
	}{
		{"AllReduce", func(c *Comm) error { return c.AllReduce(1, 1, 4, Float32, Sum, nil) }},
		{"AsyncError", func(c *Comm) error { return c.AsyncError() }},
	} {
		c, err := CommInitRank(2, UniqueID{9}, 1)
		require.NoError(t, err)
		testHookEnter = func(h *Comm) {
			testHookEnter = nil
			require.NoError(t, h.Abort())
		}
		err = call.fn(c)
		testHookEnter = nil
		require.ErrorIs(t, err, ErrInvalidArgument, call.name)
		assert.ErrorContains(t, err, "was aborted", call.name)
		assert.Equal(t, "ncclCommAbort", f.lastOp(), call.name)
		assert.Zero(t, f.usedFreed, "%s handed NCCL a freed communicator", call.name)
	}
}
