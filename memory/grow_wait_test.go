package memory_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// waitFailSync is a memtest.StreamSync whose host waits fail while fail
// is set; it is no StreamWaiter, so a pool at its limit waits on the host.
type waitFailSync struct {
	f    *memtest.StreamSync
	fail error
}

func (w *waitFailSync) RecordEvent(s memory.Stream) (memory.StreamEvent, error) {
	return w.f.RecordEvent(s)
}
func (w *waitFailSync) Done(ev memory.StreamEvent) bool { return w.f.Done(ev) }
func (w *waitFailSync) Release(ev memory.StreamEvent)   { w.f.Release(ev) }
func (w *waitFailSync) Wait(ev memory.StreamEvent) error {
	if w.fail != nil {
		return w.fail
	}
	return w.f.Wait(ev)
}

// errWaitBroken is the failure waitFailSync injects.
var errWaitBroken = errors.New("wait broken")

// atLimitWithPending makes a host manager whose device tier is at its
// limit (4 MiB: a 2 MiB segment or page of its own, and the managed
// tier's, which the device limit counts, cached) with a block pending on
// stream 2's work, and whose host waits fail.
func atLimitWithPending(t *testing.T, seg memory.SegmentMode) (*memory.Manager, *waitFailSync, *memory.Allocation) {
	t.Helper()
	sync := &waitFailSync{f: memtest.NewStreamSync()}
	cfg := memory.Config{Segments: seg, StreamSync: sync, PlanSteps: memory.PlanNone}
	cfg.Limits[memory.TierDevice] = 4 << 20
	m := memory.NewHostManager(cfg)
	e, err := m.Alloc(1<<20, memory.RoleEmbedding) // managed: cached once freed
	require.NoError(t, err)
	require.Equal(t, memory.TierManaged, e.Tier())
	require.NoError(t, e.Free())
	x, err := m.Alloc(1<<20, memory.RoleActivation)
	require.NoError(t, err)
	z, err := m.Alloc(1<<20, memory.RoleActivation)
	require.NoError(t, err)
	require.NoError(t, m.RecordStream(x, 2))
	require.NoError(t, x.Free()) // pending on stream 2
	sync.fail = errWaitBroken
	return m, sync, z
}

// TestGrowWaitFailureStillFlushes: a pool at its limit whose wait for
// blocks pending on other streams fails goes on as after any shortage:
// it releases the cache that shares its limit (the managed tier's) and
// retries, as PyTorch's allocator frees cached blocks and retries after
// cudaMalloc's out of memory. The failed wait is not lost: its block
// stays pending, and EmptyCache, which waits again, reports it. Before,
// the allocation failed with the wait's error and no flush.
func TestGrowWaitFailureStillFlushes(t *testing.T) {
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m, sync, z := atLimitWithPending(t, seg)
		a, err := m.Alloc(1<<20, memory.RoleActivation)
		require.NoError(t, err, "segments %d: the managed cache made room", seg)
		st := m.Stats().Tiers[memory.TierDevice]
		require.Equal(t, st.Allocated.Current+1<<20, st.Active.Current, "the block whose wait failed is still pending")
		require.ErrorIs(t, m.EmptyCache(), errWaitBroken, "EmptyCache waits again and reports it")
		sync.fail = nil
		require.NoError(t, m.EmptyCache())
		require.NoError(t, a.Free())
		require.NoError(t, z.Free())
		require.NoError(t, m.Close())
		require.NoError(t, sync.f.Err())
	}
}

// TestGrowWaitFailureOOM: when nothing makes room, the allocation fails
// with an *OOMError (counted, so that a spilling policy could spill it)
// that carries the failed wait's error too.
func TestGrowWaitFailureOOM(t *testing.T) {
	for _, seg := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		m, sync, z := atLimitWithPending(t, seg)
		m.SetPolicy(memory.SingleTierPolicy(memory.TierDevice)) // no spill
		_, err := m.Alloc(3<<20, memory.RoleActivation)
		var oom *memory.OOMError
		require.ErrorAs(t, err, &oom, "segments %d", seg)
		require.ErrorIs(t, err, memory.ErrOutOfMemory)
		require.ErrorIs(t, err, errWaitBroken, "the failed wait is part of the error")
		require.Equal(t, int64(1), m.Stats().Tiers[memory.TierDevice].OOMs)
		sync.fail = nil
		require.NoError(t, z.Free())
		require.NoError(t, m.Close())
		require.NoError(t, sync.f.Err())
	}
}
