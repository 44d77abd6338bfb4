package memtest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

func TestAddressBackendConformance(t *testing.T) {
	memtest.RunBackend(t, func() memory.Backend { return memtest.NewAddressBackend(memory.TierDevice, 1<<40) })
}

func TestAddressBackend(t *testing.T) {
	a := memtest.NewAddressBackend(memory.TierManaged, 10000)
	assert.Equal(t, "address(managed)", a.Name())
	r1, err := a.Alloc(1000)
	require.NoError(t, err)
	r2, err := a.Alloc(1000)
	require.NoError(t, err)
	assert.Nil(t, r1.Host)
	assert.Equal(t, r1.Addr+1024, r2.Addr, "ranges are 512-byte aligned and never overlap")
	_, err = a.Alloc(9000)
	require.ErrorIs(t, err, memory.ErrOutOfMemory)
	free, total, ok := a.Info()
	assert.True(t, ok)
	assert.Equal(t, int64(8000), free)
	assert.Equal(t, int64(10000), total)
	require.NoError(t, a.Free(r1))
	require.ErrorIs(t, a.Free(r1), memory.ErrDoubleFree)
	require.ErrorIs(t, a.Free(memory.Region{Addr: r2.Addr, Size: 999}), memory.ErrDoubleFree, "wrong size")
	n, bytes := a.Live()
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(1000), bytes)
}

func TestFaultBackend(t *testing.T) {
	f := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<30), 4096)
	assert.Equal(t, "fault(address(device))", f.Name())
	assert.Equal(t, memory.TierDevice, f.Tier())
	r, err := f.Alloc(3000)
	require.NoError(t, err)
	_, err = f.Alloc(2000)
	require.ErrorIs(t, err, memory.ErrOutOfMemory, "over budget")
	free, total, ok := f.Info()
	assert.True(t, ok)
	assert.Equal(t, int64(1096), free)
	assert.Equal(t, int64(4096), total)

	f.SetBudget(0)
	f.FailNext(2)
	for range 2 {
		_, err = f.Alloc(10)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		assert.Contains(t, err.Error(), "injected")
	}
	r2, err := f.Alloc(2000)
	require.NoError(t, err)
	assert.Equal(t, int64(5000), f.PeakBytes())

	require.NoError(t, f.Free(r))
	require.ErrorIs(t, f.Free(r), memory.ErrDoubleFree)
	n, bytes := f.Live()
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(2000), bytes)
	allocs, frees := f.Calls()
	assert.Equal(t, 2, allocs)
	assert.Equal(t, 1, frees)
	require.NoError(t, f.Free(r2))
}

func TestFillCheck(t *testing.T) {
	for _, n := range []int{1, 100, 64 << 10, 64<<10 + 1, 1 << 20} {
		b := make([]byte, n)
		memtest.Fill(b, 7)
		require.NoError(t, memtest.Check(b, 7), "%d bytes", n)
		require.Error(t, memtest.Check(b, 8), "another seed differs")
		b[n-1] ^= 1
		err := memtest.Check(b, 7)
		require.Error(t, err, "%d bytes: a flipped last byte is seen", n)
		assert.Contains(t, err.Error(), "byte")
	}
	b := make([]byte, 1<<20)
	memtest.Fill(b, 3)
	b[4<<10+7*(64<<10)] ^= 0xff // a sampled word in the middle
	require.Error(t, memtest.Check(b, 3))
}

func TestStreamSync(t *testing.T) {
	ss := memtest.NewStreamSync()
	e1, err := ss.RecordEvent(1)
	require.NoError(t, err)
	e2, err := ss.RecordEvent(1)
	require.NoError(t, err)
	e3, err := ss.RecordEvent(2)
	require.NoError(t, err)
	assert.False(t, ss.Done(e1), "no work finishes by itself")
	require.NoError(t, ss.Wait(e1))
	assert.True(t, ss.Done(e1))
	assert.False(t, ss.Done(e2), "waiting for an event finishes only the work before it")
	ss.Complete(1)
	assert.True(t, ss.Done(e2))
	assert.False(t, ss.Done(e3), "other streams are not affected")
	ss.CompleteAll()
	assert.True(t, ss.Done(e3))
	assert.Equal(t, 3, ss.Outstanding())
	for _, e := range []memory.StreamEvent{e1, e2, e3} {
		ss.Release(e)
	}
	assert.Zero(t, ss.Outstanding())
	require.NoError(t, ss.Err())

	ss.Release(e1)
	assert.False(t, ss.Done(e2))
	err = ss.Err()
	require.Error(t, err, "a second release and a query after release break the protocol")
	assert.Contains(t, err.Error(), "Release")
	assert.Contains(t, err.Error(), "Done")

	ss.FailNext(1)
	_, err = ss.RecordEvent(3)
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	_, err = ss.RecordEvent(3)
	require.NoError(t, err)
	assert.Equal(t, memtest.StreamSyncCalls{Records: 4, Queries: 7, Waits: 1, Releases: 4}, ss.Calls())
}

// TestFaultBackendInfoUnderLoweredBudget: a budget lowered below the live
// bytes leaves none free; Info reported the difference, a negative free
// count, which the conformance suite and an *OOMError's "device free"
// would show.
func TestFaultBackendInfoUnderLoweredBudget(t *testing.T) {
	f := memtest.NewFaultBackend(memtest.NewAddressBackend(memory.TierDevice, 1<<30), 8192)
	r, err := f.Alloc(6000)
	require.NoError(t, err)
	f.SetBudget(4096)
	free, total, ok := f.Info()
	assert.True(t, ok)
	assert.Zero(t, free)
	assert.Equal(t, int64(4096), total)
	require.NoError(t, f.Free(r))
}
