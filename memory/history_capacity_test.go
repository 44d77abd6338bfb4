package memory_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
)

// heapGrowth is the bytes the Go heap handed out while f ran.
func heapGrowth(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRecordHistoryGrowsTheRingLazily: a large capacity costs memory as
// events come, not all at once (RecordHistory(1<<22) took 416 MiB at
// once), and the ring keeps every event while it grows.
func TestRecordHistoryGrowsTheRingLazily(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	grew := heapGrowth(func() { m.RecordHistory(1 << 22) })
	assert.Less(t, grew, uint64(1<<20), "RecordHistory(1<<22) took %d bytes at once", grew)
	const pairs = 3000
	for range pairs {
		a, err := m.AllocOp(4<<10, memory.RoleActivation, 0, "matmul")
		require.NoError(t, err)
		require.NoError(t, a.Free())
	}
	h := m.History()
	assert.Equal(t, 1<<22, h.Capacity)
	assert.Zero(t, h.Dropped)
	var allocs, frees int
	for i, e := range h.Events {
		if i > 0 {
			require.Equal(t, h.Events[i-1].Seq+1, e.Seq)
		}
		switch e.Kind {
		case memory.EventAlloc:
			allocs++
		case memory.EventFree:
			frees++
			require.Equal(t, h.Events[i-1].Seq, e.AllocSeq, "each free names the alloc before it")
			require.Equal(t, "matmul", e.Op)
		}
	}
	assert.Equal(t, pairs, allocs)
	assert.Equal(t, pairs, frees)
}

// TestHistoryRingWrapsAfterGrowing: a capacity that is no power of two,
// passed by many events, keeps the newest ones in order, and frees still
// find their allocations across the wrap.
func TestHistoryRingWrapsAfterGrowing(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	m.RecordHistory(1001)
	for range 2500 {
		a, err := m.AllocOp(4<<10, memory.RoleActivation, 0, "matmul")
		require.NoError(t, err)
		require.NoError(t, a.Free())
	}
	h := m.History()
	require.Len(t, h.Events, 1001)
	assert.Equal(t, 1001, h.Capacity)
	last := h.Events[len(h.Events)-1]
	assert.Equal(t, last.Seq+1-1001, h.Events[0].Seq)
	assert.Equal(t, last.Seq+1-1001, h.Dropped, "the recording started at Seq 0")
	for i, e := range h.Events {
		if i > 0 {
			require.Equal(t, h.Events[i-1].Seq+1, e.Seq)
		}
		if e.Kind == memory.EventFree && i > 0 {
			require.Equal(t, h.Events[i-1].Seq, e.AllocSeq)
		}
	}
}

// TestRecordHistoryClampsAbsurdCapacity: RecordHistory(1<<40) was a fatal
// out-of-memory error (104 TiB of ring); it is clamped to
// MaxHistoryCapacity (or less on a small host), reported in
// History.Capacity, and costs nothing up front.
func TestRecordHistoryClampsAbsurdCapacity(t *testing.T) {
	m := memory.NewHostManager(memory.Config{})
	defer m.Close()
	grew := heapGrowth(func() { m.RecordHistory(1 << 40) })
	assert.Less(t, grew, uint64(1<<20))
	m.MarkHistory("step")
	h := m.History()
	assert.LessOrEqual(t, h.Capacity, memory.MaxHistoryCapacity)
	assert.GreaterOrEqual(t, h.Capacity, memory.DefaultHistoryCapacity)
	require.Len(t, h.Events, 1)
	p := memory.NewPool(memory.NewHostBackend(memory.TierDevice), memory.PoolConfig{})
	defer p.Close()
	p.RecordHistory(1 << 40)
	assert.LessOrEqual(t, p.History().Capacity, memory.MaxHistoryCapacity)
}
